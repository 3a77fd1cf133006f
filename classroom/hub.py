"""Start the classroom hub on loopback, and simulated students that use it.

Used by ``classroom/run.py`` (``make classroom``), ``tests/test_classroom.py`` and
``benchmarks/bench_classroom.py``. A student here does what a person does in a browser, through
the same HTTP interfaces: logs in (the hub's login form), gets a server, follows the course's
nbgitpuller link (its event stream, which the link's page reads), saves a notebook (Jupyter's
contents API) and runs a notebook's cells in a kernel (the kernel websocket, messages built by
jupyter_client's Session).
"""

import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.parse
from contextlib import closing
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = HERE / ".venv"
JUPYTERHUB = VENV / "bin" / "jupyterhub"
PROXY = HERE / "node_modules" / ".bin" / "configurable-http-proxy"
CONFIG = HERE / "jupyterhub_config.py"
#: Where nbgitpuller puts the course in each student's home.
TARGET = "attention-course"
#: Seconds to open a kernel's websocket (its handshake waits for the kernel to start).
CONNECT_TIMEOUT = 120


def missing_tools():
    """What the classroom needs that is not installed (empty when ready)."""
    missing = []
    if not JUPYTERHUB.exists():
        missing.append(f"{JUPYTERHUB} (`make classroom-env`)")
    if not PROXY.exists():
        missing.append(f"{PROXY} (`make classroom-env`: npm ci in classroom/)")
    return missing


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def repo_address():
    """The repository's public git address, from ``REPO`` in tools/nav.py; None while the
    course has none (``REPO = None``)."""
    text = (ROOT / "tools" / "nav.py").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("REPO = "):
            value = line.split("=", 1)[1].split("#")[0].strip()
            return None if value == "None" else f"https://github.com/{value.strip(chr(34))}"
    raise RuntimeError("tools/nav.py has no REPO line")


def nbgitpuller_link(hub_url, repo, branch="main", notebook="notebooks/00-index.ipynb"):
    """The link a teacher hands out: log in, start a server, pull the course, open ``notebook``.

    ``user-redirect`` sends each student to their own server; ``git-pull`` is nbgitpuller's
    page; ``targetpath`` is the folder in the student's home; ``urlpath`` is what opens after.
    """
    query = urllib.parse.urlencode({
        "repo": repo, "branch": branch, "targetpath": TARGET,
        "urlpath": f"lab/tree/{TARGET}/{notebook}",
    })
    return f"{hub_url.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def bare_clone(source, dest):
    """A bare clone of the git repository ``source`` at ``dest`` (the course as served)."""
    subprocess.run(["git", "clone", "-q", "--bare", "--no-hardlinks", str(source), str(dest)],
                   check=True, timeout=120)
    return dest


def login_form(http, hub_url, name, password):
    """POST the hub's login form as a browser does (first GET for its _xsrf cookie)."""
    page = http.get(f"{hub_url}/hub/login", timeout=30)
    page.raise_for_status()
    return http.post(f"{hub_url}/hub/login?next=", allow_redirects=False, timeout=30,
                     data={"username": name, "password": password,
                           "_xsrf": http.cookies.get("_xsrf")})


class Hub:
    """JupyterHub on 127.0.0.1 free ports, state in ``state``; a context manager.

    ``deadline`` (seconds) bounds its life: a watchdog stops it even if the caller hangs.
    ``class_group``: the class mode (system users of that group log in with their own
    passwords, servers run as them; classroom/users.py creates them), else the try-out.
    """

    def __init__(self, state, port=None, password=None, deadline=None, idle_timeout=3600,
                 class_group=None, teacher="teacher", course="attention"):
        self.state = Path(state)
        self.class_group = class_group
        self.teacher = teacher
        self.course = course
        self.port = port or free_port()
        self.password = password or secrets.token_urlsafe(12)
        self.token = secrets.token_hex(32)
        self.deadline = deadline
        self.idle_timeout = idle_timeout
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    # -- life ---------------------------------------------------------------------------------
    def start(self, timeout=300, stdout=None):  # seconds: generous for a busy machine
        self.state.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ,
                   CLASSROOM_STATE=str(self.state), CLASSROOM_PORT=str(self.port),
                   CLASSROOM_HUB_PORT=str(free_port()), CLASSROOM_PROXY_API_PORT=str(free_port()),
                   CLASSROOM_PASSWORD=self.password, CLASSROOM_DRIVER_TOKEN=self.token,
                   CLASSROOM_IDLE_TIMEOUT=str(self.idle_timeout),
                   CLASSROOM_CLASS_GROUP=self.class_group or "", CLASSROOM_TEACHER=self.teacher,
                   CLASSROOM_COURSE=self.course)
        env.pop("JUPYTERHUB_API_TOKEN", None)
        self.log_path = self.state / "hub.log"
        out = stdout if stdout is not None else open(self.log_path, "ab")
        cmd = [str(JUPYTERHUB), "-f", str(CONFIG)]
        if self.deadline:  # the hub stops by itself, whatever happens to the caller
            cmd = ["timeout", "-s", "TERM", "-k", "10", str(int(self.deadline)), *cmd]
        self.proc = subprocess.Popen(cmd, cwd=self.state, env=env, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the hub exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                if requests.get(f"{self.url}/hub/api/", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.3)
        self.stop()
        raise TimeoutError(f"the hub did not answer in {timeout} s:\n{self.log_tail()}")

    def stop(self, timeout=30):
        """Stop the hub (it stops every student's server), then its process group."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def log_tail(self, chars=4000):
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except (AttributeError, OSError):
            return ""

    # -- the hub's REST API with the driver's token ---------------------------------------------
    def api(self, method, path, **kwargs):
        kwargs.setdefault("timeout", 30)
        headers = {"Authorization": f"token {self.token}", **kwargs.pop("headers", {})}
        response = requests.request(method, f"{self.url}/hub/api{path}", headers=headers,
                                    **kwargs)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:500]}")
        return response.json() if response.content else None

    def student(self, name, password=None):
        return Student(self, name, password)


class Student:
    """One simulated student (or the teacher) on ``hub``; ``password`` in the class mode."""

    def __init__(self, hub, name, password=None):
        self.hub = hub
        self.name = name
        self.password = password or hub.password
        self.token = None
        self.http = requests.Session()

    @property
    def home(self):
        if self.hub.class_group:
            import pwd

            return Path(pwd.getpwnam(self.name).pw_dir)
        return self.hub.state / "homes" / self.name

    @property
    def server_url(self):
        return f"{self.hub.url}/user/{self.name}"

    def log_in(self):
        """The hub's login form, as a browser sends it; returns the hub's idea of who we are."""
        response = login_form(self.http, self.hub.url, self.name, self.password)
        if response.status_code != 302:
            raise RuntimeError(f"login of {self.name} failed: {response.status_code}")
        who = self.http.get(f"{self.hub.url}/hub/api/user", timeout=30,
                            headers={"X-XSRFToken": self.http.cookies.get("_xsrf", "")})
        who.raise_for_status()
        # A token of the student's own, for the API calls a browser would make with its cookie.
        self.token = self.hub.api("POST", f"/users/{self.name}/tokens",
                                  json={"note": "simulated student", "expires_in": 3600})["token"]
        return who.json()["name"]

    def start_server(self, timeout=120):
        """Ask the hub for the student's server; return the seconds until it answers."""
        t0 = time.perf_counter()
        self.hub.api("POST", f"/users/{self.name}/server")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            user = self.hub.api("GET", f"/users/{self.name}")
            server = user.get("servers", {}).get("", {})
            if server.get("ready"):
                self.get("api/status")
                return time.perf_counter() - t0
            time.sleep(0.2)
        raise TimeoutError(f"{self.name}'s server did not start in {timeout} s")

    def stop_server(self, timeout=60):
        self.hub.api("DELETE", f"/users/{self.name}/server")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.hub.api("GET", f"/users/{self.name}").get("servers"):
                return
            time.sleep(0.2)
        raise TimeoutError(f"{self.name}'s server did not stop in {timeout} s")

    def server_pid(self):
        """The process id of the student's Jupyter server (the spawner's state, for memory)."""
        user = self.hub.api("GET", f"/users/{self.name}")
        return user["servers"][""]["state"]["pid"]

    # -- the student's server ---------------------------------------------------------------------
    def request(self, method, path, **kwargs):
        kwargs.setdefault("timeout", 60)
        headers = {"Authorization": f"token {self.token}", **kwargs.pop("headers", {})}
        response = self.http.request(method, f"{self.server_url}/{path}", headers=headers,
                                     **kwargs)
        response.raise_for_status()
        return response

    def get(self, path, **kwargs):
        response = self.request("GET", path, **kwargs)
        return response.json() if "json" in response.headers.get("content-type", "") else response

    def follow_link(self, repo, branch, timeout=120):
        """Follow the course's nbgitpuller link; return nbgitpuller's progress lines.

        The link's page (``git-pull``) is fetched as a browser would; the page then reads the
        pull's event stream (``git-pull/api``), which this reads to its end.
        """
        query = {"repo": repo, "branch": branch, "targetpath": TARGET}
        page = self.request("GET", "git-pull", params=query)
        if "nbgitpuller" not in page.text.lower():
            raise RuntimeError("the git-pull page is not nbgitpuller's")
        lines = []
        with self.request("GET", "git-pull/api", params=query, stream=True,
                          timeout=timeout) as stream:
            for raw in stream.iter_lines(decode_unicode=True):
                if not raw or not raw.startswith("data:"):
                    continue
                event = json.loads(raw[len("data:"):])
                if event.get("output"):
                    lines.append(event["output"].rstrip())
                if event.get("phase") == "error":
                    raise RuntimeError(f"nbgitpuller failed: {event.get('message')}\n"
                                       + "\n".join(lines))
                if event.get("phase") == "finished":
                    return lines
        raise RuntimeError("nbgitpuller's event stream ended without 'finished'")

    def assignments(self, action=None, assignment=None):
        """nbgrader's Assignments panel in JupyterLab: the list of the course's assignments
        (``action`` None), or ``fetch`` / ``submit`` / ``fetch_feedback`` one of them."""
        course = self.hub.course
        if action is None:
            return self.get("assignments", params={"course_id": course})
        response = self.request("POST", f"assignments/{action}", timeout=300,
                                data={"course_id": course, "assignment_id": assignment})
        return response.json()

    def read(self, path):
        """The content of a file in the student's home, through the contents API."""
        return self.get(f"api/contents/{path}", params={"content": 1})["content"]

    def save_notebook(self, path, nb):
        """Save a notebook (a dict) as JupyterLab's Save does."""
        self.request("PUT", f"api/contents/{path}",
                     json={"type": "notebook", "format": "json", "content": nb})

    def run_notebook(self, path, timeout=300):
        """Run every code cell of the notebook ``path`` in a new kernel (``Kernel.run_cells``)."""
        nb = self.read(path)
        sources = ["".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                   for cell in nb["cells"] if cell["cell_type"] == "code"]
        with Kernel(self, path) as kernel:
            return kernel.run_cells(sources, timeout=timeout)


class Kernel:
    """A kernel of a student's server, opened as JupyterLab opens one for a notebook."""

    def __init__(self, student, path):
        self.student = student
        self.path = path

    def __enter__(self):
        import websocket
        from jupyter_client.session import Session

        s = self.student
        session = s.request("POST", "api/sessions", json={
            "path": self.path, "type": "notebook", "name": Path(self.path).name,
            "kernel": {"name": "python3"}}).json()
        self.session_id = session["id"]
        self.kernel_id = session["kernel"]["id"]
        self.messages = Session(key=b"", username=s.name)
        ws_url = s.server_url.replace("http://", "ws://", 1)
        # The handshake waits for the kernel to start: four students' kernels starting at once
        # on a busy machine took longer than 30 s (a failed run of tests/test_classroom.py).
        self.ws = websocket.create_connection(
            f"{ws_url}/api/kernels/{self.kernel_id}/channels",
            header=[f"Authorization: token {s.token}"], timeout=CONNECT_TIMEOUT)
        return self

    def __exit__(self, *exc):
        try:
            self.ws.close()
        finally:
            self.student.request("DELETE", f"api/sessions/{self.session_id}")

    def kernel_pid(self):
        """The kernel's process id, asked of the kernel itself."""
        result = self.run_cells(["import os; print(os.getpid())"])[0]
        return int(result["stdout"].strip())

    def execute(self, code, timeout=300):
        """Run ``code``; return a dict: seconds, status, stdout, errors (tracebacks, stderr)."""
        import websocket
        from jupyter_client.jsonutil import json_default
        from jupyter_server.services.kernels.connection.base import deserialize_binary_message

        msg = self.messages.msg("execute_request", {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": True})
        msg["channel"] = "shell"
        t0 = time.perf_counter()
        self.ws.send(json.dumps(msg, default=json_default))
        msg_id = msg["header"]["msg_id"]
        result = {"stdout": "", "errors": [], "status": None}
        idle = False
        end = time.monotonic() + timeout
        while not (idle and result["status"]):
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"cell did not finish in {timeout} s:\n{code[:200]}")
            self.ws.settimeout(left)  # a quiet cell may run longer than the handshake's limit
            try:
                frame = self.ws.recv()
            except websocket.WebSocketTimeoutException:
                raise TimeoutError(f"cell did not finish in {timeout} s:\n{code[:200]}") from None
            # Messages with binary buffers (widgets' PNG frames) come as binary frames.
            reply = deserialize_binary_message(frame) if isinstance(frame, bytes) else \
                json.loads(frame)
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = reply["msg_type"] if "msg_type" in reply else reply["header"]["msg_type"]
            content = reply["content"]
            if kind == "stream" and content["name"] == "stdout":
                result["stdout"] += content["text"]
            elif kind == "stream":
                result["errors"].append(content["text"])
            elif kind == "error":
                result["errors"].append("\n".join(content["traceback"]))
            elif kind == "execute_reply":
                result["status"] = content["status"]
            elif kind == "status" and content["execution_state"] == "idle":
                idle = True
        result["seconds"] = time.perf_counter() - t0
        return result

    def run_cells(self, sources, timeout=300):
        """Run the cells in order; a list of ``execute`` results, one per cell."""
        return [self.execute(code, timeout=timeout) for code in sources]
