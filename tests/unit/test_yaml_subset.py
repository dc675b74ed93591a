"""The kubeconfig YAML read without PyYAML: the same document as ``yaml.safe_load`` or none.

``yaml_subset.load`` may decline any text (PyYAML reads it then) but must never answer
something PyYAML would not: each test compares it with PyYAML on documents written the way
kubeconfigs are, and on text assembled from the constructs that leave the subset.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobcontroller.runtime import yaml_subset
from jobcontroller.testing.yamlfast import load as _pyyaml_reads  # libyaml's, as the fallback

KIND = """\
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMvakNDQWVhZ0F3SUJ=
    server: https://127.0.0.1:38291
  name: kind-kind
contexts:
- context:
    cluster: kind-kind
    user: kind-kind
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: kind-kind
  user:
    client-certificate-data: LS0tLS1CRUdJTiBDRVJU
    client-key-data: LS0tLS1CRUdJTiBSU0Eg
"""

EKS = """\
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0t
    server: https://ABCDEF0123.gr7.us-west-2.eks.amazonaws.com
  name: arn:aws:eks:us-west-2:111122223333:cluster/ml
contexts:
- context:
    cluster: arn:aws:eks:us-west-2:111122223333:cluster/ml
    namespace: "team-a"
    user: arn:aws:eks:us-west-2:111122223333:cluster/ml
  name: arn:aws:eks:us-west-2:111122223333:cluster/ml
current-context: arn:aws:eks:us-west-2:111122223333:cluster/ml
kind: Config
preferences: {}
users:
- name: arn:aws:eks:us-west-2:111122223333:cluster/ml
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - --region
      - us-west-2
      - eks
      - get-token
      - --cluster-name
      - ml
      - --output
      - json
      command: aws
      env:
      - name: AWS_PROFILE
        value: 'research'
      interactiveMode: IfAvailable
      provideClusterInfo: false
"""

GKE_WITH_COMMENTS = """\
# written by gcloud
apiVersion: v1
clusters:
  - cluster:
      certificate-authority-data: LS0t
      server: https://34.118.0.10
      insecure-skip-tls-verify: no
    name: gke_proj_europe-west4_train

contexts:
  - context:
      cluster: gke_proj_europe-west4_train
      user: gke_proj_europe-west4_train
    name: gke_proj_europe-west4_train
current-context: gke_proj_europe-west4_train
kind: Config
preferences: {}
users:
  - name: gke_proj_europe-west4_train
    user:
      exec:
        apiVersion: client.authentication.k8s.io/v1beta1
        command: gke-gcloud-auth-plugin
        installHint: Install gke-gcloud-auth-plugin for use with kubectl by following
          https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl
        provideClusterInfo: true
"""


@pytest.mark.parametrize("text", [KIND, EKS], ids=["kind", "eks"])
def test_kubeconfigs_as_their_tools_write_them_are_read_without_pyyaml(text: str) -> None:
    doc = yaml_subset.load(text)
    assert doc is not None
    assert doc == _pyyaml_reads(text)


def test_a_multi_line_scalar_is_left_to_pyyaml() -> None:
    """gcloud's install hint runs over two lines: declined, not cut at the first."""
    assert yaml_subset.load(GKE_WITH_COMMENTS) is None
    one_line = GKE_WITH_COMMENTS.replace("following\n          https", "following https")
    doc = yaml_subset.load(one_line)
    assert doc is not None and doc == _pyyaml_reads(one_line)
    assert doc["clusters"][0]["cluster"]["insecure-skip-tls-verify"] is False


def test_a_kubeconfig_dumped_as_the_local_control_plane_writes_it_is_in_the_subset() -> None:
    from jobcontroller.testing.certs import CertificateAuthority

    ca = CertificateAuthority()
    pair = ca.client(user="admin")

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    text = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": "https://127.0.0.1:40123",
                        "certificate-authority-data": b64(ca.pair.cert),
                    },
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate-data": b64(pair.cert),
                        "client-key-data": b64(pair.key),
                    },
                }
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
            "current-context": "local",
        }
    )
    doc = yaml_subset.load(text)
    assert doc is not None and doc == _pyyaml_reads(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\n",  # a number
        "a: 2001-12-14\n",  # a date
        "a: .inf\n",
        "a: -1\n",
        "a: 0x1f\n",
        "a: &x b\nc: *x\n",  # an anchor and an alias
        "a: !!str b\n",  # a tag
        "a: |\n  b\n",  # a block scalar
        "a: b # c\n",  # a comment after a value
        "a: 'it''s'\n",  # a doubled quote
        'a: "b\\tc"\n',  # an escape
        "a: [b, c]\n",  # a flow sequence
        "a: {b: c}\n",
        "a: b\na: c\n",  # a duplicate key
        "---\na: b\n",  # a document marker
        "a:\tb\n",  # a tab
        "a: caf\u00e9\n",  # not ASCII
        "a: b\r c\n",  # a lone carriage return
        "on: b\n",  # a key PyYAML reads as True
        "- a\n- b\n",  # not a mapping
        "  a: b\n",  # indented as a whole
        "a:\n  b\n",  # a scalar on the next line
        "a:\n  - - b\n",  # a sequence in a sequence's item
        "",
    ],
)
def test_what_leaves_the_subset_is_declined(text: str) -> None:
    assert yaml_subset.load(text) is None


def test_crlf_line_ends_and_null_words_read_as_pyyaml_does() -> None:
    text = "a: ~\r\nb:\r\nc: Null\r\nd: YES\r\ne: []\r\nf: ''\r\n"
    doc = yaml_subset.load(text)
    assert doc == {"a": None, "b": None, "c": None, "d": True, "e": [], "f": ""}
    assert doc == _pyyaml_reads(text)


def _dump(doc: Any, *, indent: int = 2, sort_keys: bool = True) -> str:
    return yaml.dump(
        doc,
        Dumper=yaml.CSafeDumper,
        default_flow_style=False,
        indent=indent,
        sort_keys=sort_keys,
        width=10_000,
    )


# Documents shaped as kubeconfigs are: keys of words, strings that start with a letter.
_WORD = st.from_regex(r"[A-Za-z][A-Za-z0-9_.\-/]{0,12}", fullmatch=True)
_STRING = st.from_regex(r"(--?)?[A-Za-z/_][A-Za-z0-9 :/_.@=+,\-]{0,30}", fullmatch=True)
_LEAF = st.one_of(
    _STRING,
    st.booleans(),
    st.none(),
    st.builds(dict),
    st.builds(list),
    st.text(max_size=12),  # anything: quoted, escaped or declined
    st.integers(),
    st.floats(allow_nan=False),
)
_DOC = st.recursive(
    _LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_WORD, inner, max_size=5)),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    doc=st.dictionaries(_WORD, _DOC, min_size=1, max_size=6),
    indent=st.sampled_from([2, 4]),
    sort_keys=st.booleans(),
)
def test_documents_dumped_in_block_style_read_as_pyyaml_reads_them(
    doc: dict[str, Any], indent: int, sort_keys: bool
) -> None:
    text = _dump(doc, indent=indent, sort_keys=sort_keys)
    got = yaml_subset.load(text)
    assert got is None or got == _pyyaml_reads(text), text


_SUBSET_LEAF = st.one_of(_STRING, st.booleans(), st.none(), st.builds(dict), st.builds(list))
# Sequences hold scalars and mappings, never sequences, as in kubeconfigs.
_SUBSET_MAP: st.SearchStrategy[dict[str, Any]] = st.deferred(
    lambda: st.dictionaries(_WORD, _SUBSET_DOC, max_size=4)
)
_SUBSET_DOC: st.SearchStrategy[Any] = st.deferred(
    lambda: st.one_of(
        _SUBSET_LEAF,
        _SUBSET_MAP,
        st.lists(st.one_of(_SUBSET_LEAF, _SUBSET_MAP), max_size=4),
    )
)


@settings(max_examples=300, deadline=None)
@given(doc=st.dictionaries(_WORD, _SUBSET_DOC, min_size=1, max_size=6))
def test_kubeconfig_shaped_documents_are_all_read_without_pyyaml(doc: dict[str, Any]) -> None:
    """Not a subset so small it never answers: what kubeconfigs hold is read, every time."""
    if any(k in yaml_subset._WORDS for k in _keys(doc)):
        return  # a word key ("on", "null") that PyYAML itself reads as a bool or None
    text = _dump(doc)
    got = yaml_subset.load(text)
    assert got is not None, text
    assert got == _pyyaml_reads(text) == doc, text


def _keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [*value, *(k for v in value.values() for k in _keys(v))]
    if isinstance(value, list):
        return [k for v in value for k in _keys(v)]
    return []


_IN_SUBSET = st.sampled_from(["a", "b c", "--t", "/u", "a:b", "'h'", '"k"', "yes", "~", "{}", ""])
_VALUES = st.one_of(
    _IN_SUBSET,
    _IN_SUBSET,
    _IN_SUBSET,
    st.sampled_from(
        [
            "'i''j'",
            '"l\\"m"',
            "'",
            "x # n",
            "#c",
            "&o x",
            "*o",
            "!!str x",
            "|",
            ">-",
            "1",
            "-2",
            ".5",
            "2001-01-01",
            "[]",
            "[p, q]",
            "{r: s}",
            "a: b",
            "c:",
            "- a",
            "-",
            "---",
            "...",
            "?",
            "x\t",
            "x\ry",
        ]
    ),
)
_KEYS = st.one_of(_WORD, _WORD, _WORD, st.sampled_from(["on", "1", "a b", "'q'", "-", ""]))


@st.composite
def _line(draw: st.DrawFn) -> str:
    """A line as kubeconfigs have them, or nearly: an indent, perhaps an item's dash, perhaps
    a key, perhaps a value, each drawn from what is in the subset and what is not."""
    indent = draw(st.sampled_from(["", "", "", "  ", "  ", "    ", " "]))
    dash = draw(st.sampled_from(["", "", "", "- ", "- ", "-  ", "-"]))
    key = draw(st.one_of(st.none(), _KEYS))
    value = draw(_VALUES)
    if key is None:
        return indent + dash + value
    return indent + dash + key + ":" + (" " + value if value else "")


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    doc=st.dictionaries(_WORD, _SUBSET_DOC, min_size=1, max_size=4),
    edits=st.lists(st.tuples(st.integers(0, 40), st.booleans(), _line()), min_size=1, max_size=3),
)
def test_text_from_any_fragments_is_read_as_pyyaml_reads_it_or_declined(
    doc: dict[str, Any], edits: list[tuple[int, bool, str]]
) -> None:
    """Never a document where PyYAML fails, never a different one where it reads one: a
    kubeconfig-shaped document with lines replaced or inserted, in the subset or not."""
    lines = _dump(doc).splitlines()
    for at, insert, line in edits:
        at %= len(lines) + 1
        lines[at : at if insert else at + 1] = [line]
    text = "".join(line + "\n" for line in lines)
    got = yaml_subset.load(text)
    if got is None:
        return
    try:
        expected = _pyyaml_reads(text)
    except yaml.YAMLError as exc:
        raise AssertionError(f"read {got!r} where PyYAML fails ({exc}):\n{text}") from exc
    assert got == expected, text


def test_an_operator_reading_a_kubeconfig_as_kubectl_writes_it_never_imports_pyyaml(
    tmp_path: Path,
) -> None:
    """16 ms of CPU and 2.3 MB of RSS at every start outside a cluster; one outside the
    subset still loads, through PyYAML."""
    from jobcontroller.testing.certs import CertificateAuthority

    ca = CertificateAuthority()
    pair = ca.client(user="kind-kind")
    text = KIND
    for key, pem in (
        ("certificate-authority-data", ca.pair.cert),
        ("client-certificate-data", pair.cert),
        ("client-key-data", pair.key),
    ):
        start = text.index(f"{key}: ") + len(key) + 2
        text = text[:start] + base64.b64encode(pem).decode() + text[text.index("\n", start) :]
    plain = tmp_path / "kind"
    plain.write_text(text)
    anchored = tmp_path / "anchored"
    anchored.write_text(text.replace("    server:", "    server: &s"))
    probe = (
        "import sys\n"
        "from jobcontroller.runtime.kubeconfig import load_kubeconfig\n"
        "print(load_kubeconfig(sys.argv[1]).host, 'yaml' in sys.modules)\n"
    )
    for path, imported in ((plain, "False"), (anchored, "True")):
        out = subprocess.run(
            [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == ["https://127.0.0.1:38291", imported]
