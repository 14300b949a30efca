"""JupyterHub for a class of the course, on one machine: `make hub` (deploy/hub/README.md).

Learners log in, and each gets a JupyterLab server started from the class's shared environment
(`make env PREFIX=/opt/graph-course`): its Python is their kernel, its `course-grade` is on their
terminal's PATH, and nbgitpuller (installed there) serves the class's links, which pull a release
of the course into their home folder.

This configuration is for trying a class out on one machine and for the course's end-to-end test:
DummyAuthenticator (any name, any password) and SimpleLocalProcessSpawner,
which runs every learner's server as the user who started the Hub, each in a home folder of its own
under HUB_HOMES. That is no isolation between learners. For a real class use The Littlest JupyterHub
(README.md beside this file), which gives each learner a system user.

Settings, from the environment (run.py sets them for `make hub`):
    COURSE_ENV    the shared environment (default /opt/graph-course)
    HUB_PORT      where the Hub listens, on 127.0.0.1 (default 8000)
    HUB_API_PORT  the Hub's own API port (default HUB_PORT + 1)
    PROXY_API_PORT  the proxy's API port (default HUB_PORT + 2)
    HUB_RUNTIME   the Hub's database, cookie secret and proxy pid file (default deploy/hub/run)
    HUB_HOMES     the learners' home folders, one per name (default HUB_RUNTIME/homes)
    HUB_ADMINS    comma-separated instructors (default: instructor)
"""

import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 (JupyterHub's config loader provides it)

HERE = Path(__file__).resolve().parent
COURSE_ENV = Path(os.environ.get("COURSE_ENV", "/opt/graph-course"))
PORT = int(os.environ.get("HUB_PORT", "8000"))
RUNTIME = Path(os.environ.get("HUB_RUNTIME", HERE / "run"))
HOMES = Path(os.environ.get("HUB_HOMES", RUNTIME / "homes"))
RUNTIME.mkdir(parents=True, exist_ok=True)
HOMES.mkdir(parents=True, exist_ok=True)

# Where the Hub listens: loopback only (put a TLS proxy in front for anything else).
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = PORT
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(os.environ.get("HUB_API_PORT", PORT + 1))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ.get('PROXY_API_PORT', PORT + 2)}"
proxy = HERE / "node_modules" / ".bin" / "configurable-http-proxy"
c.ConfigurableHTTPProxy.command = [str(proxy)]
c.ConfigurableHTTPProxy.pid_file = str(RUNTIME / "proxy.pid")
# Its state in one folder; stopping the Hub stops the proxy and every learner's server.
c.JupyterHub.db_url = f"sqlite:///{RUNTIME / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(RUNTIME / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(RUNTIME / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True
c.JupyterHub.cleanup_proxy = True

# Who logs in: JupyterHub's test authenticator (any name, any password); the instructors are
# the Hub's admins.
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.admin_users = set(filter(None, os.environ.get("HUB_ADMINS",
                                                              "instructor").split(",")))

# Each learner's server: JupyterLab from the shared environment, in their own home folder.
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = str(HOMES / "{username}")
c.Spawner.cmd = [str(COURSE_ENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.args = ["--allow-root"] if os.getuid() == 0 else []
c.Spawner.environment = {
    # The shared environment first: its python, jupyter and course-grade, in every terminal.
    "PATH": f"{COURSE_ENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",
    # No per-learner copies of Python's bytecode in a read-only environment.
    "PYTHONDONTWRITEBYTECODE": "1",
    "COURSE_DEVICE": "cpu",
}
if os.environ.get("COURSE_HUB"):  # run.py's mark, so that stopping the Hub leaves nothing behind
    c.Spawner.environment["COURSE_HUB"] = os.environ["COURSE_HUB"]
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120

if not (COURSE_ENV / "bin" / "jupyterhub-singleuser").exists():
    sys.exit(f"no shared environment in {COURSE_ENV}: run `make env PREFIX={COURSE_ENV}` first")
if not proxy.exists():
    sys.exit(f"no {proxy}: run `npm install --prefix {HERE}` (make hub does)")
