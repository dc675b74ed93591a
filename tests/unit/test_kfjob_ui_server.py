"""``kfjob ui``'s guards and its Render page, without a cluster: which Host values and POSTs
the server accepts (CSRF), and that render errors land on the lines they name."""

from __future__ import annotations

import textwrap

from kfjob.ui.locate import document_nodes, field_line, split_error
from kfjob.ui.renderpage import render_page, run_render
from kfjob.ui.server import allowed_hosts, check_post

TOKEN = "s3cret"


def test_loopback_answers_its_names_only() -> None:
    hosts = allowed_hosts("127.0.0.1", 8080)
    assert hosts is not None
    assert {"127.0.0.1:8080", "localhost:8080", "[::1]:8080"} <= hosts
    assert "evil.example:8080" not in hosts  # DNS rebinding: a name that resolves to us
    assert "localhost:8081" not in hosts
    assert allowed_hosts("0.0.0.0", 8080) is None  # every address: any Host


def test_a_post_needs_the_token_and_the_same_origin() -> None:
    host = "127.0.0.1:8080"
    ok = {"origin": f"http://{host}", "sec-fetch-site": "same-origin"}
    assert check_post(ok, form_token=TOKEN, token=TOKEN, host=host) is None
    assert check_post({"x-csrf-token": TOKEN}, form_token=None, token=TOKEN, host=host) is None
    assert check_post(ok, form_token=None, token=TOKEN, host=host) is not None
    assert check_post(ok, form_token="guess", token=TOKEN, host=host) is not None
    other = {"origin": "http://evil.example", "sec-fetch-site": "cross-site"}
    refused = check_post(other, form_token=TOKEN, token=TOKEN, host=host)
    assert refused is not None and "evil.example" in refused
    assert check_post({"sec-fetch-site": "cross-site"}, form_token=TOKEN, token=TOKEN, host=host)


BAD = textwrap.dedent(
    """\
    apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    metadata:
      name: bad
    spec:
      pytorchReplicaSpecs:
        Master:
          replicas: 2
          template:
            spec:
              containers:
                - name: pytorch
                  image: x
        Worker:
          replicas: -1
          template:
            spec:
              containers:
                - name: pytorch
                  image: x
    """
)


def test_field_paths_map_to_their_lines() -> None:
    (doc,) = document_nodes(BAD)
    assert field_line(doc, "spec.pytorchReplicaSpecs[Master].replicas") == 8
    assert field_line(doc, "spec.pytorchReplicaSpecs.Worker.replicas") == 15
    assert field_line(doc, "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].name") == 12
    # A field that is not there: its nearest parent.
    assert field_line(doc, "spec.pytorchReplicaSpecs.Master.restartPolicy") == 7
    assert split_error("spec.x[0].y: must be set") == ("spec.x[0].y", "must be set")
    assert split_error("the job is not valid") == ("", "the job is not valid")


def test_render_errors_are_shown_at_their_lines() -> None:
    result = run_render(BAD, namespace="", operator_flags="")
    assert not result.rendered
    lines = {e.line for e in result.errors}
    assert 15 in lines, result.errors  # replicas: -1 (the schema)
    html = render_page(text=BAD, namespace="", flags="", csrf=TOKEN, result=result)
    assert 'role="alert"' in html and 'href="#L15"' in html
    numbered = html[html.index('<ol class="numbered"') :]
    line15 = numbered[numbered.index('<li id="L15"') :].split("</li>")[0]
    assert 'class="bad"' in line15 and "replicas" in line15
    assert 'aria-invalid="true"' in html


def test_a_yaml_syntax_error_points_at_its_line() -> None:
    result = run_render("apiVersion: v1\nkind: [\n", namespace="", operator_flags="")
    assert len(result.errors) == 1 and result.errors[0].line == 3


def test_a_good_job_renders_its_pods_and_env() -> None:
    good = BAD.replace("replicas: 2", "replicas: 1").replace("replicas: -1", "replicas: 2")
    result = run_render(good, namespace="team", operator_flags="")
    assert not result.errors
    html = render_page(text=good, namespace="team", flags="", csrf=TOKEN, result=result)
    for pod in ("bad-master-0", "bad-worker-0", "bad-worker-1"):
        assert pod in html
    assert "MASTER_ADDR=bad-master-0" in html and "WORLD_SIZE=3" in html


def test_render_escapes_the_pasted_yaml() -> None:
    hostile = "kind: <script>alert(1)</script>\n"
    result = run_render(hostile, namespace="", operator_flags="")
    html = render_page(text=hostile, namespace="", flags="", csrf=TOKEN, result=result)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)" in html
