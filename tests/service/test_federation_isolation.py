"""Issue 37: what is checked is what runs. No reading of the text decides whether a call can reach the network.

A canary listener on loopback counts connections. Every query and update below names it (it is never on an
allow-list) and must leave it untouched on four kinds of endpoint, each a real server on loopback:

* **default**: no allow-list; SPARQL is evaluated on a thread in a network namespace of its own;
* **strict**: no allow-list, network isolation off (what a machine that forbids namespaces gets): every query
  takes the verified path;
* **allow-listed**: another endpoint (a second listener) on the allow-list: the verified path;
* **update token**: SPARQL Update on, no allow-list (isolated), and with an allow-list (verified).

``kqe-rdf sparql`` likewise, isolated and strict. The repro of the issue comes first, then every probe form
of tests/service/test_endpoint_security.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from support.fixtures_kb import bio_kb  # noqa: F401 - fixture
from kqe_rdf.core.config import Settings
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.service.app import create_app
from kqe_rdf.service.isolation import OfflineThread, not_wanted
from support.live_servers import serving
from support.canary import QUERY_FORMS, UPDATE_FORMS, Canary, aimed_at, canary, clean_env  # noqa: F401
from support.paths import ROOT

pytestmark = pytest.mark.slow  # servers, subprocesses or big inputs: not in `make test-quick`

TOKEN = "t0ken"
UPDATE = {"Content-Type": "application/sparql-update", "Authorization": "Bearer " + TOKEN}
DISEASES = "SELECT ?name WHERE { ?d a bio:Disease ; rdfs:label ?name } ORDER BY ?name"

#: The query of issue 37: a \u escape in a string and one in an IRI, and a quote in a trailing comment, made the
#: guard's lexer read the SERVICE call as part of a string.
REPRO = ('SELECT * { BIND("p\\u0022q" AS ?z) VALUES ?v { <urn:x\\u0041#> } '
         'SERVICE <{t}/sparql> { ?x ?p ?o } } #"')
REPRO_UPDATES = {
    "LOAD": 'INSERT DATA { <urn:a> <urn:b> "p\\u0022q" } ; LOAD <{t}/data.ttl> #"',
    "INSERT ... WHERE { SERVICE }": 'INSERT { ?x ?p ?o } WHERE { BIND("p\\u0022q" AS ?z) '
                                    'VALUES ?v { <urn:x\\u0041#> } SERVICE <{t}/sparql> { ?x ?p ?o } } #"',
}


@pytest.fixture(scope="module")
def allowed():
    """The endpoint on the allow-list: a second listener, so an allowed call is seen to happen."""
    c = Canary()
    yield c
    c.close()


def _at(template: str, canary: Canary) -> str:
    """A template of this file (plain braces) pointed at the canary."""
    return template.replace("{t}", f"http://127.0.0.1:{canary.port}")


def _copy(kb, tmp_path_factory, name: str) -> KnowledgeBase:
    folder = tmp_path_factory.mktemp(name) / "kb"
    shutil.copytree(kb.path, folder)
    return KnowledgeBase.open(folder)


SERVERS = {
    "default": lambda allowed: Settings(),
    "strict": lambda allowed: Settings(server_network_isolation=False),
    "allow-listed": lambda allowed: Settings(server_service_allow=f"http://127.0.0.1:{allowed.port}/sparql"),
    "update token": lambda allowed: Settings(server_update_token=TOKEN),
    "update token, allow-listed": lambda allowed: Settings(server_update_token=TOKEN,
                                                           server_service_allow=f"http://127.0.0.1:{allowed.port}/sparql"),
}


@pytest.fixture(scope="module", params=list(SERVERS))
def server(request, bio_kb, tmp_path_factory, allowed):  # noqa: F811
    settings = SERVERS[request.param](allowed)
    kb = _copy(bio_kb, tmp_path_factory, "isolation") if settings.server.update_token else bio_kb
    with serving(create_app(kb, settings)) as url:
        yield request.param, url


def _query(url: str, query: str) -> httpx.Response:
    return httpx.post(url + "/sparql", content=query.encode(), timeout=30,
                      headers={"Content-Type": "application/sparql-query", "Accept": "application/sparql-results+json"})


def test_the_server_says_which_protection_holds(server):
    name, url = server
    health = httpx.get(url + "/health", timeout=10).json()
    isolated = name in ("default", "update token")
    assert health["network_isolation"] is isolated, health
    assert ("network namespace" in health["protection"]) is isolated
    assert ("verified path" in health["protection"]) is not isolated
    assert _query(url, DISEASES).json()["results"]["bindings"]  # and it answers


def test_the_repro_of_the_issue_calls_nothing(server, canary):
    name, url = server
    before = canary.connections
    response = _query(url, _at(REPRO, canary))
    assert response.status_code in (400, 403, 502), (name, response.status_code, response.text)
    assert canary.connections == before, f"{name}: the canary was called"
    if name == "default":  # issue 49: the check reads it as Oxigraph does (the plain form) and refuses it itself
        assert response.status_code == 403 and "not on this server's allow-list" in response.text, response.text


@pytest.mark.parametrize("form", list(REPRO_UPDATES))
def test_the_repro_as_an_update_calls_nothing(server, canary, form):
    """With the token: refused or failed, never a call; on a server without one: 403, updates are off."""
    name, url = server
    before = canary.connections
    response = httpx.post(url + "/update", content=_at(REPRO_UPDATES[form], canary).encode(), headers=UPDATE,
                          timeout=30)
    assert response.status_code in ((400, 403, 502) if name.startswith("update token") else (403,)), \
        (name, response.status_code, response.text)
    assert canary.connections == before, f"{name}: the canary was called"


def test_every_earlier_probe_form_calls_nothing(server, canary):
    name, url = server
    before = canary.connections
    answers = {form: _query(url, aimed_at(template, canary)).status_code for form, template in QUERY_FORMS.items()}
    if name.startswith("update token"):
        for form, template in UPDATE_FORMS.items():
            answers["update: " + form] = httpx.post(url + "/update", content=aimed_at(template, canary).encode(),
                                                    headers=UPDATE, timeout=30).status_code
    assert canary.connections == before, f"{name}: the canary was called"
    assert not [form for form, status in answers.items() if status >= 500 and status != 502], answers


def test_a_call_the_guard_does_not_see_is_stopped_by_the_namespace(bio_kb, canary):  # noqa: F811
    """The isolation alone, without the courtesy check: pyoxigraph on the offline thread cannot connect."""
    from pyoxigraph import Store

    offline = OfflineThread()
    try:
        assert offline.active, offline.reason
        before = canary.connections
        query = f"SELECT * {{ SERVICE <http://127.0.0.1:{canary.port}/sparql> {{ ?s ?p ?o }} }}"
        with pytest.raises(OSError, match="unreachable"):
            offline.run(lambda: list(Store().query(query)))
        assert offline.run(lambda: list(Store().query(query.replace("SERVICE", "SERVICE SILENT")))) != []
        assert canary.connections == before
    finally:
        offline.close()
    # The same query on this thread does call out: the namespace is what stopped it.
    list(Store().query(query))
    assert canary.connections == before + 1


def test_an_allowed_endpoint_is_still_called_on_the_verified_path(bio_kb, allowed):  # noqa: F811
    endpoint = f"http://127.0.0.1:{allowed.port}/sparql"
    before = allowed.connections
    with serving(create_app(bio_kb, Settings(server_service_allow=endpoint))) as url:
        response = _query(url, f"SELECT * {{ SERVICE <{endpoint}> {{ ?s ?p ?o }} }}")
        escaped = _query(url, "SELECT * { SERVICE <http\\u003A//127.0.0.1:%d/sparql> { ?s ?p ?o } } # x" % allowed.port)
    assert response.status_code == 200 and escaped.status_code == 200, (response.text, escaped.text)
    assert allowed.connections == before + 2


def test_isolation_is_not_wanted_where_the_network_is_needed():
    assert not_wanted(Settings()) is None
    assert "allow-list" in not_wanted(Settings(server_service_allow="http://a.example/sparql"))
    assert "remote store" in not_wanted(Settings(store_endpoint="http://127.0.0.1:1/sparql"))
    assert "off" in not_wanted(Settings(server_network_isolation=False))


def _cli(kb, query: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kqe_rdf", "sparql", query, "--kb", str(kb.path), "--format", "json"],
                          capture_output=True, text=True, timeout=120, env={**clean_env(), **env})


@pytest.mark.parametrize("mode", ["isolated", "strict"])
def test_kqe_rdf_sparql_calls_nothing(bio_kb, canary, mode):  # noqa: F811
    env = {"KQE_SERVER_NETWORK_ISOLATION": "false"} if mode == "strict" else {}
    before = canary.connections
    for query in [_at(REPRO, canary), *(aimed_at(t, canary) for t in list(QUERY_FORMS.values())[::4])]:
        done = _cli(bio_kb, query, **env)
        assert done.returncode != 0 and done.stderr.startswith("error:"), (query, done.stdout, done.stderr)
    assert canary.connections == before
    done = _cli(bio_kb, DISEASES, **env)
    assert done.returncode == 0 and "Focal epilepsy type 1" in done.stdout, done.stderr


def _readable_tree(source: Path, target: Path) -> None:
    """``source`` under ``target``, where user nobody may read it: a checkout under a 0700 folder (a fresh clone in
    ``mktemp -d``) is out of nobody's reach, its venv with it. Files anyone may read already are hard-linked (a
    venv's 20,000 files in about a second; their modes are left alone), the others copied and made readable."""
    def place(src: str, dst: str) -> str:
        mode = os.stat(src).st_mode
        if mode & 0o004:
            try:
                os.link(src, dst)
                return dst
            except OSError:  # (another file system)
                pass
        shutil.copy2(src, dst)
        os.chmod(dst, (mode & 0o777) | 0o444 | (0o111 if mode & 0o100 else 0))
        return dst

    shutil.copytree(source, target, copy_function=place, ignore_dangling_symlinks=True)
    for folder, _dirs, _files in os.walk(target):
        os.chmod(folder, 0o755)


@pytest.fixture(scope="module")
def as_nobody():
    """(the command that runs Python as user nobody, the environment in which it imports this package, a folder
    nobody may write in) — with the package and its site-packages copied where nobody can read them, wherever the
    checkout is (the tests ran ``No module named kqe_rdf`` in a clone under a 0700 folder); skipped where there is no
    Python nobody may run."""
    import site
    import tempfile

    command = _nobody_python()
    if command is None:
        pytest.skip("no Python here that user nobody may run (this one and /usr/bin/python3 are out of its reach "
                    "or of another version)")
    folder = Path(tempfile.mkdtemp(prefix="kqe-nobody-"))
    try:
        os.chmod(folder, 0o755)
        for name in ("kqe_rdf", "queries", "ontologies"):  # (resources.py finds the last two beside the package)
            _readable_tree(ROOT / name, folder / "src" / name)
        paths = [folder / "src"]
        for number, packages in enumerate(p for p in site.getsitepackages() if Path(p).is_dir()):
            _readable_tree(Path(packages), folder / f"site-packages-{number}")
            paths.append(folder / f"site-packages-{number}")
        (folder / "home").mkdir(mode=0o777)
        os.chmod(folder / "home", 0o777)
        env = {**clean_env(), "HOME": str(folder / "home"), "PYTHONPATH": os.pathsep.join(map(str, paths)),
               "PYTHONDONTWRITEBYTECODE": "1"}
        yield command, env, folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(not Path("/usr/bin/setpriv").exists() or os.geteuid() != 0, reason="needs root and setpriv")
def test_a_user_who_is_not_root_gets_the_namespace_through_a_user_namespace(canary, as_nobody):
    """Not root: the offline thread enters a user namespace of its own first (where the kernel allows it), else
    it says why not, and the queries take the verified path."""
    command, env, folder = as_nobody
    script = ("import socket, sys; from kqe_rdf.service.isolation import OfflineThread, enter_user_namespace;"
              "reason = enter_user_namespace(); t = OfflineThread(reason);"
              "print('active' if t.active else 'inactive: ' + t.reason, flush=True);"
              f"print(t.run(lambda: socket.create_connection(('127.0.0.1', {canary.port}), 2) and 0))")
    before = canary.connections
    done = subprocess.run([*command, "-c", script], capture_output=True, text=True, timeout=60, cwd=folder, env=env)
    state = done.stdout.split("\n")[0]
    assert state == "active" or state.startswith("inactive: "), (done.stdout, done.stderr)
    if state == "active":  # the connection failed on the offline thread (a socket is of the namespace it was made in)
        assert done.returncode != 0 and "Network is unreachable" in done.stderr, done.stderr
        assert canary.connections == before


def _nobody_python() -> list[str] | None:
    """A Python that user nobody can run with this package importable: this one, or the system's of the same
    version with our site-packages on PYTHONPATH (a pyenv under /root is out of nobody's reach); None if neither."""
    probe = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    for python in (sys.executable, "/usr/bin/python3"):
        done = subprocess.run([*probe, python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                              text=True, check=False)
        if done.returncode == 0 and done.stdout.strip() == str(tuple(sys.version_info[:2])):
            return [*probe, python]
    return None


@pytest.mark.skipif(not Path("/usr/bin/setpriv").exists() or os.geteuid() != 0, reason="needs root and setpriv")
def test_kqe_rdf_sparql_as_a_user_runs_isolated_and_says_so(bio_kb, canary, as_nobody):  # noqa: F811
    """Issue 49: not root, `kqe-rdf sparql` asked for its user namespace after opening the KB had started threads
    (refused: EINVAL), so it always took the verified path, and said nothing about it."""
    command, env, folder = as_nobody
    kb = folder / "kb"
    shutil.copytree(bio_kb.path, kb)
    subprocess.run(["chmod", "-R", "a+rX", str(kb)], check=True)  # (a copy of the KB's files: their own modes)
    done = subprocess.run([*command, "-m", "kqe_rdf", "sparql", DISEASES, "--kb", str(kb), "--format", "json"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=folder)
    assert done.returncode == 0 and "Focal epilepsy type 1" in done.stdout, done.stderr
    assert "SERVICE and LOAD: SPARQL is evaluated in a network namespace of its own" in done.stderr, done.stderr
    before = canary.connections
    done = subprocess.run([*command, "-m", "kqe_rdf", "sparql", _at(REPRO, canary), "--kb", str(kb)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=folder)
    assert done.returncode != 0 and done.stderr.startswith("error:"), done.stderr
    assert canary.connections == before
