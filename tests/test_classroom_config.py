"""classroom/z2jh/config.yaml: valid for the Zero to JupyterHub chart, numbers from measurement.

No registry (PyPI, npm) ships the chart's ``values.schema.json`` (it comes only inside the Helm
chart), so this test checks the file's structure against the part of the chart's schema that
the file uses, summarised here from the chart's ``values.schema.yaml`` (chart 4.x):

* top level (no other keys allowed): hub, proxy, singleuser, scheduling, prePuller, cull,
  ingress, custom, debug, rbac, global, imagePullSecret(s), enabled, fullnameOverride,
  nameOverride;
* ``singleuser`` (no other keys): image {name, tag, pullPolicy, pullSecrets} (name and tag
  required, both strings); cpu {limit, guarantee} (numbers); memory {limit, guarantee}
  (number or string with a unit such as ``1G``); defaultUrl (string); cmd; extraEnv;
  lifecycleHooks {postStart, preStop}; storage {type (dynamic, static, none),
  homeMountPath (both required), capacity, ...}; startTimeout (integer); networkPolicy;
  profileList; extraFiles; and others not used here;
* ``cull`` (no other keys; enabled required): enabled (bool), users, adminUsers,
  removeNamedServers (bool), timeout, every, concurrency, maxAge (integers, seconds);
* ``hub.config``: free-form traitlets config (class name -> option -> value);
* ``scheduling.userScheduler`` requires enabled/plugins/pluginConfig/logLevel when given
  in full; the chart's defaults fill in the ones a config file leaves out, so only
  ``enabled`` is checked; ``prePuller.hook``/``continuous``: {enabled} (bool).

And the numbers, as measured by benchmarks/bench_classroom.py (benchmarks/RESULTS-classroom.md):
the memory guarantee holds a student with notebook 11's model loaded (the largest notebook; a
class runs it at the same time), the limit that plus a second notebook (04) open.
"""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "classroom" / "z2jh" / "config.yaml"
RESULTS = ROOT / "benchmarks" / "RESULTS-classroom.md"

TOP = {"hub", "proxy", "singleuser", "scheduling", "prePuller", "cull", "ingress", "custom",
       "debug", "rbac", "global", "imagePullSecret", "imagePullSecrets", "enabled",
       "fullnameOverride", "nameOverride"}
SINGLEUSER = {"image", "cpu", "memory", "defaultUrl", "cmd", "extraEnv", "lifecycleHooks",
              "storage", "startTimeout", "networkPolicy", "profileList", "extraFiles",
              "podNameTemplate", "initContainers", "nodeSelector", "extraTolerations",
              "extraNodeAffinity", "extraPodAffinity", "extraPodAntiAffinity", "cloudMetadata",
              "events", "extraAnnotations", "extraContainers", "extraLabels", "extraPodConfig",
              "extraResource", "fsGid", "networkTools", "serviceAccountName",
              "allowPrivilegeEscalation", "uid"}
IMAGE = {"name", "tag", "pullPolicy", "pullSecrets"}
STORAGE = {"type", "homeMountPath", "capacity", "dynamic", "static", "extraLabels",
           "extraVolumes", "extraVolumeMounts"}
CULL = {"enabled", "users", "adminUsers", "removeNamedServers", "timeout", "every",
        "concurrency", "maxAge"}
HUB = {"config", "extraConfig", "services", "loadRoles", "baseUrl", "concurrentSpawnLimit",
       "activeServerLimit", "consecutiveFailureLimit", "db", "resources", "image",
       "extraEnv", "extraFiles", "networkPolicy", "nodeSelector", "redirectToServer",
       "shutdownOnLogout", "templatePaths", "templateVars"}
UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
         "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def to_bytes(value):
    """A Kubernetes memory quantity (``1G``, ``512Mi``, or a number of bytes) in bytes."""
    if isinstance(value, (int, float)):
        return float(value)
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]i?)?", str(value))
    assert match, f"not a Kubernetes memory quantity: {value!r}"
    return float(match.group(1)) * UNITS[match.group(2) or ""]


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load(CONFIG.read_text(encoding="utf-8"))


def check_keys(section, allowed, where):
    assert isinstance(section, dict), f"{where} must be a mapping"
    unknown = set(section) - allowed
    assert not unknown, f"{where}: keys the chart's schema does not allow: {sorted(unknown)}"


def test_keys_are_the_charts(config):
    check_keys(config, TOP, "top level")
    single = config["singleuser"]
    check_keys(single, SINGLEUSER, "singleuser")
    check_keys(single["image"], IMAGE, "singleuser.image")
    assert isinstance(single["image"]["name"], str) and isinstance(single["image"]["tag"], str)
    check_keys(single["cpu"], {"limit", "guarantee"}, "singleuser.cpu")
    check_keys(single["memory"], {"limit", "guarantee"}, "singleuser.memory")
    check_keys(single["storage"], STORAGE, "singleuser.storage")
    assert single["storage"]["type"] in {"dynamic", "static", "none"}
    assert isinstance(single["storage"]["homeMountPath"], str)
    check_keys(single["lifecycleHooks"], {"postStart", "preStop"}, "singleuser.lifecycleHooks")
    check_keys(config["cull"], CULL, "cull")
    assert isinstance(config["cull"]["enabled"], bool)
    for key in ("timeout", "every", "maxAge"):
        assert isinstance(config["cull"].get(key, 0), int)
    check_keys(config["hub"], HUB, "hub")
    for name, options in config["hub"].get("config", {}).items():
        assert isinstance(options, dict), f"hub.config.{name} must map options to values"
    for key in ("hook", "continuous"):
        part = config.get("prePuller", {}).get(key, {"enabled": True})
        check_keys(part, {"enabled"}, f"prePuller.{key}")


def test_resources_are_consistent(config):
    single = config["singleuser"]
    assert 0 < single["cpu"]["guarantee"] <= single["cpu"]["limit"]
    assert 0 < to_bytes(single["memory"]["guarantee"]) <= to_bytes(single["memory"]["limit"])
    assert config["cull"]["enabled"] is True and config["cull"]["timeout"] > 0


def test_memory_comes_from_the_benchmark(config):
    """The guarantee holds notebook 11's measured RSS, the limit 11's and 04's together."""
    text = RESULTS.read_text(encoding="utf-8")
    rss = {}
    for label, key in (("ran notebook 04", "04"), ("ran notebook 11", "11")):
        row = next(line for line in text.splitlines() if label in line)
        rss[key] = float(re.findall(r"\| (\d+) MiB \|", row)[0]) * 2**20
    memory = config["singleuser"]["memory"]
    assert to_bytes(memory["guarantee"]) >= rss["11"]
    assert to_bytes(memory["limit"]) >= rss["11"] + rss["04"]


def test_the_image_and_link_are_this_course(config):
    single = config["singleuser"]
    hook = str(single["lifecycleHooks"]["postStart"])
    found = re.search(r'^REPO = "(.+)"', (ROOT / "tools" / "nav.py").read_text(), re.M)
    assert "gitpuller" in hook
    if found is None:  # REPO = None: no public address yet, the hook names the placeholder
        assert re.search(r"^REPO = None", (ROOT / "tools" / "nav.py").read_text(), re.M)
        assert "github.com/OWNER/attention-course" in hook
        assert "`OWNER/attention-course`" in (ROOT / "docs" / "teaching.md").read_text(
            encoding="utf-8"), "docs/teaching.md must say what the hook's OWNER stands for"
    else:
        assert f"github.com/{found.group(1)}" in hook, \
            "the course's address is not tools/nav.py's REPO"
    assert single["defaultUrl"].startswith("/lab")
    # nbgitpuller must be in the image repo2docker builds from binder/.
    reqs = (ROOT / "binder" / "requirements.txt").read_text(encoding="utf-8")
    assert re.search(r"^nbgitpuller==", reqs, re.M)


def test_readme_link_is_built_from_repo():
    """The link in docs/teaching.md (linked from the README) is classroom/hub.py's, for
    tools/nav.py's REPO: when REPO changes, this test says what to update."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("classroom_hub_cfg",
                                                  ROOT / "classroom" / "hub.py")
    hub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hub)
    teaching = (ROOT / "docs" / "teaching.md").read_text(encoding="utf-8")
    if hub.repo_address() is None:  # no public address yet: the guide shows the link's form
        assert "https://HUB/hub/user-redirect/git-pull?repo=" in teaching
        return
    link = hub.nbgitpuller_link("https://HUB", hub.repo_address(), "main")
    assert link in teaching, f"docs/teaching.md should show the classroom link {link}"


def test_the_grading_layer_is_the_charts_and_points_nbgrader_at_the_exchange():
    """classroom/z2jh/nbgrader.yaml: chart keys only; its nbgrader_config.py and extraConfig are
    Python; the exchange nbgrader is told about is the volume mounted in every pod; the pin it
    asks the image for is classroom/requirements.txt's."""
    import ast

    layer = yaml.safe_load((CONFIG.parent / "nbgrader.yaml").read_text(encoding="utf-8"))
    check_keys(layer, TOP, "top level")
    single = layer["singleuser"]
    check_keys(single, SINGLEUSER, "singleuser")
    check_keys(single["storage"], STORAGE, "singleuser.storage")
    check_keys(layer["hub"], HUB, "hub")
    for name, code in layer["hub"]["extraConfig"].items():
        ast.parse(code, filename=f"hub.extraConfig.{name}")
    (mount,) = single["storage"]["extraVolumeMounts"]
    (volume,) = single["storage"]["extraVolumes"]
    assert mount["name"] == volume["name"]
    files = single["extraFiles"]
    (config,) = [f for f in files.values() if f["mountPath"].endswith("nbgrader_config.py")]
    tree = ast.parse(config["stringData"])
    settings = {ast.unparse(node.targets[0]): ast.literal_eval(node.value) for node in tree.body
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)}
    assert settings["c.Exchange.root"] == mount["mountPath"]
    pin = re.search(r"^nbgrader==(\S+)", (ROOT / "classroom" / "requirements.txt").read_text(),
                    re.M).group(1)
    assert f"nbgrader=={pin}" in (CONFIG.parent / "nbgrader.yaml").read_text(encoding="utf-8")
