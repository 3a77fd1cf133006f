"""JupyterHub for a class on ONE machine (``make classroom``, the tests, the benchmark).

Everything is read from environment variables that ``classroom/hub.py`` sets (it picks free
ports and a state directory); run ``classroom/run.py`` rather than ``jupyterhub`` by hand.

* Hub, proxy and every student's server listen on 127.0.0.1 only.
* Students log in with JupyterHub's DummyAuthenticator: any user name, one shared password
  (``CLASSROOM_PASSWORD``). Good for trying the course out and for tests; a real class uses
  its institution's login (OAuthenticator, LTI13Authenticator, ...).
* The spawner is SimpleLocalProcessSpawner: each student's Jupyter server is a local process
  of the hub's own Unix user, with its own home directory under ``STATE/homes/NAME``. It
  needs no system accounts, which is what a one-machine try-out and CI can offer, but it
  isolates nothing (students could read each other's files). A real one-machine class uses
  SystemdSpawner (one systemd unit per student, its own Unix user, MemoryMax/CPUQuota
  enforced by cgroups) or, for more than one machine, Zero to JupyterHub on Kubernetes
  (``classroom/z2jh/config.yaml``).
* The students' kernel is the course's pinned environment: the single-user server runs from
  ``classroom/.venv`` (requirements.txt + JupyterHub + nbgitpuller, built by
  ``make classroom-env``), and its ``python3`` kernel is that same interpreter.
* ``mem_limit`` / ``cpu_limit`` below are what the benchmark measured a student needs. A local
  process spawner does NOT enforce them: it only passes them to the server as MEM_LIMIT and
  CPU_LIMIT (shown by tools such as jupyter-resource-usage). SystemdSpawner and Kubernetes
  enforce them.
* Idle servers are stopped by jupyterhub-idle-culler, run by the hub as a service.
"""

import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821  (JupyterHub's config loader defines get_config)

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent  # the hub runs from classroom/.venv
STATE = Path(os.environ.get("CLASSROOM_STATE", HERE / "state")).resolve()
STATE.mkdir(parents=True, exist_ok=True)


def env_int(name, default):
    return int(os.environ.get(name, default))


# --- network: loopback only ---------------------------------------------------------------
c.JupyterHub.bind_url = f"http://127.0.0.1:{env_int('CLASSROOM_PORT', 8000)}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{env_int('CLASSROOM_HUB_PORT', 8081)}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env_int('CLASSROOM_PROXY_API_PORT', 8001)}"
c.ConfigurableHTTPProxy.command = [str(HERE / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
c.Spawner.ip = "127.0.0.1"

# --- state: database, cookie secret, students' homes ----------------------------------------
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every student's server

# --- who may log in -------------------------------------------------------------------------
c.JupyterHub.authenticator_class = "dummy"
# (JupyterHub 5.3 deprecated this option in favour of SharedPasswordAuthenticator, which also
# needs a separate 32-character admin password; for a loopback try-out this is simpler.)
c.DummyAuthenticator.password = os.environ.get("CLASSROOM_PASSWORD", "attention")
c.Authenticator.allow_all = True
c.Authenticator.admin_users = {"teacher"}

# --- the students' servers ------------------------------------------------------------------
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = str(STATE / "homes" / "{username}")
c.Spawner.cmd = [str(VENV_BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
# No language-server extension: no language server is installed for it to serve, and looking
# for them slows every spawn.
c.Spawner.args = ["--ServerApp.jpserver_extensions=jupyter_lsp=False"]
if os.geteuid() == 0:  # CI and this project's machines run as root
    c.Spawner.args.append("--allow-root")
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 90
# The venv's bin first, so that `git` (nbgitpuller) and the kernel find the course's tools.
c.Spawner.environment = {"PATH": f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
# From benchmarks/RESULTS-classroom.md: a student's server + kernel is 280 MiB with notebook 04
# run and 396 MiB with notebook 11's model loaded; 1G holds both notebooks open at once, and half
# a core per running student kept 4 students on 2 cores under 2x their single-user cell time.
# Not enforced by this spawner (see above); classroom/z2jh/config.yaml uses the same numbers.
c.Spawner.mem_limit = os.environ.get("CLASSROOM_MEM_LIMIT", "1G")
c.Spawner.cpu_limit = float(os.environ.get("CLASSROOM_CPU_LIMIT", "2"))
c.Spawner.cpu_guarantee = 0.5
c.Spawner.mem_guarantee = "512M"

# --- stop idle servers (jupyterhub-idle-culler as a hub-managed service) ----------------------
c.JupyterHub.services = [
    {
        "name": "idle-culler",
        "command": [sys.executable, "-m", "jupyterhub_idle_culler",
                    f"--timeout={env_int('CLASSROOM_IDLE_TIMEOUT', 3600)}"],
    },
]
c.JupyterHub.load_roles = [
    {
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    },
]

# A token for scripted students (tests, benchmark): a service that may create users, start and
# stop their servers and hand each student a token of their own.
if os.environ.get("CLASSROOM_DRIVER_TOKEN"):
    c.JupyterHub.services.append(
        {"name": "classroom-driver", "api_token": os.environ["CLASSROOM_DRIVER_TOKEN"]})
    c.JupyterHub.load_roles.append(
        {
            "name": "classroom-driver",
            "scopes": ["admin:users", "admin:servers", "admin:server_state", "tokens",
                       "access:servers"],
            "services": ["classroom-driver"],
        })
