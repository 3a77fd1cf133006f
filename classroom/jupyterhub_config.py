"""JupyterHub for a class on ONE machine (``make classroom``, the tests, the benchmark).

Everything is read from environment variables that ``classroom/hub.py`` sets (it picks free
ports and a state directory); run ``classroom/run.py`` rather than ``jupyterhub`` by hand.
Two modes, chosen by ``CLASSROOM_CLASS_GROUP``:

* **Try-out** (the default; ``make classroom``): JupyterHub's DummyAuthenticator (any user
  name, one shared password ``CLASSROOM_PASSWORD``) and SimpleLocalProcessSpawner: every
  student's Jupyter server is a process of the hub's own Unix user, with a home under
  ``STATE/homes/NAME``. It needs no system accounts, and it isolates nothing: any student can
  read any other's files. For trying the course out, never for a graded class.
* **Class** (``CLASSROOM_CLASS_GROUP=GROUP``, the hub run as root; ``classroom/run.py
  --class-group``, tests/test_grading.py): every student and the teacher is a Unix user of
  their own in GROUP (``classroom/users.py`` creates them: home ``STATE/homes/NAME`` mode 0700,
  a real password), who logs in with that password (PAMAuthenticator; only GROUP may log in;
  ``CLASSROOM_TEACHER`` is the hub's admin), and whose server and kernels run as that user
  (LocalProcessSpawner). The hub's own files are created private (umask 077).
* Grading (both modes): nbgrader's JupyterLab extensions are in the environment and every
  server reads ``STATE/jupyter/nbgrader_config.py`` (written here): the course id
  ``CLASSROOM_COURSE`` ("attention"), the exchange ``STATE/exchange`` (1777) and each user's
  course directory ``~/course`` (the teacher's holds the source assignments, the gradebook and
  the hidden tests). Students fetch and submit in JupyterLab's Assignments panel. In the class
  mode the exchange is classroom/class_exchange.py's: a submission is readable by its author
  and the teacher only, and ``collect`` takes it only when its owner is the student it names;
  the course's folders in the exchange are made the teacher's at every start of the hub
  (classroom/users.py ``prepare_course``), so no student can take them first.
* Hub, proxy and every student's server listen on 127.0.0.1 only.
* The students' kernel is the course's pinned environment: the single-user server runs from
  ``classroom/.venv`` (requirements.txt + JupyterHub + nbgitpuller + nbgrader, built by
  ``make classroom-env``), and its ``python3`` kernel is that same interpreter.
* ``mem_limit`` / ``cpu_limit`` below are what the benchmark measured a student needs. A local
  process spawner does NOT enforce them: it only passes them to the server as MEM_LIMIT and
  CPU_LIMIT (shown by tools such as jupyter-resource-usage). SystemdSpawner and Kubernetes
  (``classroom/z2jh/``) enforce them.
* Idle servers are stopped by jupyterhub-idle-culler, run by the hub as a service.
"""

import os
import shutil
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

# --- who may log in, and as whom their servers run ------------------------------------------
CLASS_GROUP = os.environ.get("CLASSROOM_CLASS_GROUP", "")
TEACHER = os.environ.get("CLASSROOM_TEACHER", "teacher")
if CLASS_GROUP:
    os.umask(0o077)  # the hub's database and logs: not for the students to read
    c.JupyterHub.authenticator_class = "pam"
    c.Authenticator.allow_all = False
    c.PAMAuthenticator.allowed_groups = {CLASS_GROUP}
    c.PAMAuthenticator.open_sessions = False
    c.Authenticator.admin_users = {TEACHER}
    c.JupyterHub.spawner_class = "localprocess"  # each server runs as its user, in their home
else:
    c.JupyterHub.authenticator_class = "dummy"
    # (JupyterHub 5.3 deprecated this option in favour of SharedPasswordAuthenticator, which
    # also needs a separate 32-character admin password; for a loopback try-out this is simpler.)
    c.DummyAuthenticator.password = os.environ.get("CLASSROOM_PASSWORD", "attention")
    c.Authenticator.allow_all = True
    c.Authenticator.admin_users = {TEACHER}
    c.JupyterHub.spawner_class = "simple"
    c.SimpleLocalProcessSpawner.home_dir_template = str(STATE / "homes" / "{username}")

# --- grading: nbgrader's shared configuration, read by every user's server -------------------
NBGRADER_CONFIG = STATE / "jupyter"
NBGRADER_CONFIG.mkdir(exist_ok=True)
os.chmod(NBGRADER_CONFIG, 0o755)
EXCHANGE = STATE / "exchange"
EXCHANGE.mkdir(exist_ok=True)
os.chmod(EXCHANGE, 0o1777)
(NBGRADER_CONFIG / "nbgrader_config.py").write_text(f"""\
# Written by classroom/jupyterhub_config.py at every start of the hub: do not edit.
from pathlib import Path
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = {os.environ.get("CLASSROOM_COURSE", "attention")!r}
c.CourseDirectory.root = str(Path.home() / "course")
c.Exchange.root = {str(EXCHANGE)!r}
c.Exchange.path_includes_course = True
""" + (f"""
# The class mode: submissions private to their author and the teacher, collected only when
# their owner is the student they name (classroom/class_exchange.py, copied next to this file).
import sys
sys.path.insert(0, {str(NBGRADER_CONFIG)!r})
c.ExchangeFactory.release_assignment = "class_exchange.PrivateRelease"
c.ExchangeFactory.submit = "class_exchange.PrivateSubmit"
c.ExchangeFactory.collect = "class_exchange.OwnerCheckedCollect"
""" if CLASS_GROUP else ""), encoding="utf-8")
os.chmod(NBGRADER_CONFIG / "nbgrader_config.py", 0o644)
if CLASS_GROUP:
    shutil.copyfile(HERE / "class_exchange.py", NBGRADER_CONFIG / "class_exchange.py")
    os.chmod(NBGRADER_CONFIG / "class_exchange.py", 0o644)
    # The course's exchange folders, the teacher's, before any student logs in: a student who
    # made exchange/COURSE first would stop every release (classroom/users.py).
    sys.path.insert(0, str(HERE))
    from users import prepare_course  # noqa: E402  (classroom/users.py, next to this file)

    for aside in prepare_course(EXCHANGE, os.environ.get("CLASSROOM_COURSE", "attention"),
                                TEACHER):
        print(f"[classroom] a folder of the course's exchange was not the teacher's: renamed "
              f"aside to {aside}", file=sys.stderr)

# --- the students' servers ------------------------------------------------------------------
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
c.Spawner.environment = {"PATH": f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                         "JUPYTER_CONFIG_PATH": str(NBGRADER_CONFIG)}
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
