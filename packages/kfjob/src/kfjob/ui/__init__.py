"""``kfjob ui``: a local web page that shows training jobs live, with the user's own RBAC.

``command`` wires it into the ``kfjob`` command and serves :class:`~kfjob.ui.server.UiServer`
(standard library only: the pages are server-rendered HTML with one small script and one
stylesheet shipped in the package) on 127.0.0.1 by default. The modules: ``model`` (what a row
or a section shows, pure), ``html``, ``pages`` and ``renderpage`` (markup, pure), ``locate``
(an error's line in pasted YAML), ``cluster`` (the API calls), ``watch`` (list+watch, and the
waker a stream sleeps on), ``hub`` (the shared watches behind the jobs page), ``jobfeed`` (the
watches behind one job's page), ``access`` (what the user may do), ``streams`` (the pages'
server-sent events), ``server``.

Nothing is imported here, so that ``kfjob``'s other commands do not load the web server.
"""
