#!/usr/bin/env python3
"""Writes the analyzer's fixture corpus (tests/analyzer/fixtures/) and the example job outputs
(examples/outputs/).

Each fixture is a directory with the job's files in the training harness's layout (or a plain log),
a case.json saying how to analyse it, and, after `UPDATE_GOLDEN=1 ctest -R analyzer`, the golden
expected.json. The logs are assembled from the line shapes real jobs print: the harness header and
stage banners, `srun -l` task labels, JAX/XLA/RCCL start-up noise, MaxText config dumps and
`completed step:` lines, PyTorch's `[rankN]:` prefixes, Ray's actor prefixes, Slurm's own messages.

Run it from anywhere; it rewrites the fixture logs (not the goldens).
"""
import datetime
import json
import os
import random
import shutil
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(ROOT, "fixtures")
EXAMPLES = os.path.normpath(os.path.join(ROOT, "..", "..", "examples", "outputs"))

T0 = 1795255200  # 2026-11-21 10:00:00 UTC
LAST_WRITE = None  # when the last generated log was last written (its mtime in the tests)


def ts(t, frac=True):
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    s = d.strftime("%Y-%m-%d %H:%M:%S")
    if frac:
        s += ",%03d" % int((t - int(t)) * 1000)
    return s


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def glog(t, sev="I"):
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return "%s%s %s.%06d" % (sev, d.strftime("%m%d"), d.strftime("%H:%M:%S"), int((t - int(t)) * 1e6))


class Log:
    """A job log being written: time advances as lines are added."""

    def __init__(self, job_id, name, nodes, tasks_per_node=1, seed=0, t=T0):
        self.lines = []
        self.t = float(t)
        self.job_id = job_id
        self.name = name
        self.nodes = nodes
        self.ntasks = len(nodes) * tasks_per_node
        self.tpn = tasks_per_node
        self.rng = random.Random(seed)

    def add(self, line):
        self.lines.append(line)

    def task(self, rank, text):
        width = len(str(self.ntasks - 1))
        self.lines.append("%*d: %s" % (width, rank, text))

    def advance(self, seconds):
        self.t += seconds

    def host_of(self, rank):
        return self.nodes[rank // self.tpn]

    def text(self):
        global LAST_WRITE
        LAST_WRITE = int(self.t)
        return "\n".join(self.lines) + "\n"


def header(log, passthrough, ray=0, extra_env=()):
    log.add("=" * 72)
    log.add(" slurm job %d  %s  on %d node(s)  started %s" % (log.job_id, log.name, len(log.nodes), ts(log.t, False)))
    log.add("=" * 72)
    log.add("SLURM_JOB_ID=%d" % log.job_id)
    log.add("SLURM_JOB_NAME=%s" % log.name)
    log.add("SLURM_JOB_NODELIST=%s" % ",".join(log.nodes))
    log.add("NNODES=%d" % len(log.nodes))
    log.add("RAY=%d" % ray)
    log.add("MODEL=%s" % log.name)
    log.add("IMAGE=registry.example.com/ml/maxtext-rocm:2026.11.2")
    log.add("STAGE_TIMEOUTS=preflight:900,pull:1800,ecc:600,train:259200")
    log.add("PASSTHROUGH_ARGS=%s" % passthrough)
    for e in extra_env:
        log.add(e)
    log.add("JOB_WORKSPACE=/shared/home/alice/maxtext/outputs")


def stages_ok(log, fail_at=None, fail_line=None):
    """Preflight, docker pull, ECC check. fail_at: stage name that prints fail_line and stops."""
    for stage, dur, noise in (
        ("Preflight", 14, ["[preflight] checking for stale GPU processes on %s" % h for h in log.nodes]
         + ["OCI runtime exec failed: exec failed: unable to start container process: exec: \"pkill\": executable file not found in $PATH: unknown",
            "[exec] docker exec failed on gpu container 3f2a9c1b; falling back to host-level kill",
            "[cgroup] Sent SIGKILL to 0/0 processes"]),
        ("Docker pull", 122, ["[pull] %s: registry.example.com/ml/maxtext-rocm:2026.11.2 Pulling from ml/maxtext-rocm" % h for h in log.nodes]
         + ["[pull] Digest: sha256:9c4e2f7d0b1a88e3b2c6d1f5a4e7b9c0d2f6a8e1c3b5d7f9a0b2c4d6e8f0a1b3"]),
        ("ECC check", 3, ["[ecc] %s: 8 GPUs, 0 uncorrectable, 0 correctable" % h for h in log.nodes]),
    ):
        log.add("== %s START %s" % (stage, ts(log.t, False)))
        for n in noise:
            log.add(n)
        if fail_at == stage:
            for l in fail_line:
                log.add(l)
            return False
        log.advance(dur)
        log.add("== %s OK (%ds)" % (stage, dur))
    return True


def jax_startup(log, ray_prefix=False):
    log.add("== Training START %s" % ts(log.t, False))
    for r in range(log.ntasks):
        t = log.t + r * 0.01
        log.task(r, "%s %d cuda_driver.cc:152] Failed call to cuInit: UNKNOWN ERROR (303)" % (glog(t, "E"), 2231 + r))
        log.task(r, "%s %d tpu_initializer_helper.cc:269] No hardware is found. Using default TPU version: jellyfish" % (glog(t), 2231 + r))
        log.task(r, "%s %d pjrt_api.cc:79] Enabling PjRt/TPU event dependency logging" % (glog(t), 2231 + r))
        log.task(r, "Fiber init: default domain = futex (init-domain.cc:42)")
        log.task(r, "Cannot read CPU core %d (topology.cc:71)" % (96 + r))
        log.task(r, "%s %d trace.cc:94] No device identifiers found" % (glog(t), 2231 + r))
    log.advance(8)
    for r in range(log.ntasks):
        h = log.host_of(r)
        log.task(r, "%s:%d:%d [0] NCCL INFO Bootstrap : Using eth0:10.1.0.%d<0>" % (h, 2231 + r, 2231 + r, 17 + r))
        log.task(r, "%s:%d:%d [0] NCCL WARN MSCCL++: Feature not enabled" % (h, 2231 + r, 2231 + r))
        log.task(r, "%s:%d:%d [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.1.0.%d<0>" % (h, 2231 + r, 2231 + r, 17 + r))
        log.task(r, "%s:%d:%d [0] NCCL INFO comm 0x55d5c04f2a10 rank %d nranks %d cudaDev 0 busId 1b000 commId 0x9a3b7c2d1e0f4a5b - Init COMPLETE" % (h, 2231 + r, 2231 + r, r * 8, log.ntasks * 8))


def maxtext_config(log, steps, period=None, ckpt=True):
    log.task(0, "Config param base_output_directory: /shared/home/alice/maxtext/outputs/%d-%s" % (log.job_id, log.name))
    log.task(0, "Config param checkpoint_dir: /shared/home/alice/maxtext/outputs/ckpt-%s/checkpoints/" % log.name)
    if period is not None:
        log.task(0, "Config param checkpoint_period: %d" % period)
    log.task(0, "Config param enable_checkpointing: %s" % ("True" if ckpt else "False"))
    log.task(0, "Config param per_device_batch_size: 2.0")
    log.task(0, "Config param steps: %d" % steps)
    log.task(0, "Num_devices: %d, shape (1, %d, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)" % (log.ntasks * 8, log.ntasks * 8))
    log.task(0, "number parameters: 70.554 billion")
    log.task(0, "Per train step:\n Total TFLOPs: 2251.43 \n split as 94.12% learnable weight flops and 5.88% attention flops".replace("\n", " "))
    log.task(0, "Token indices sequence length is longer than the specified maximum sequence length for this model (9182 > 8192). Running this sequence through the model will result in indexing errors")


def restore_message(log, step):
    if step is None:
        log.task(0, "No existing checkpoints found, not restoring checkpoint.")
    else:
        log.task(0, "restoring from this run's directory step %d" % step)


def steps(log, first, last, seconds=9.5, compile_seconds=95.0, every_rank=False, ckpt_period=None, stamp=True):
    """completed step: lines for first..last (inclusive), time advancing."""
    for s in range(first, last + 1):
        dt = compile_seconds if s == first else seconds + log.rng.uniform(-0.2, 0.2)
        log.advance(dt)
        ranks = range(log.ntasks) if every_rank else [0]
        for r in ranks:
            prefix = "[%s] " % ts(log.t, False) if stamp else ""
            log.task(r, "%scompleted step: %d, seconds: %.3f, TFLOP/s/device: %.3f, Tokens/s/device: %.3f, total_weights: 1048576, loss: %.3f"
                     % (prefix, s, dt, 401.2 + log.rng.uniform(-3, 3), 3421.9 + log.rng.uniform(-20, 20), 11.2 - 0.001 * s))
        if s % 50 == 0:
            r = log.rng.randrange(log.ntasks)
            h = log.host_of(r)
            log.task(r, "%s:%d:%d [0] NCCL INFO Channel 03/1 : %d[3] -> %d[3] [send] via NET/IB/1/GDRDMA" % (h, 2231 + r, 2240 + r, r * 8 + 3, (r * 8 + 11) % (log.ntasks * 8)))
        if ckpt_period and s > 0 and s % ckpt_period == 0:
            log.task(0, "Saved a checkpoint at step %d." % s)


def node_exits(log, codes):
    for h, c in zip(log.nodes, codes):
        log.add("NODE_EXIT host=%s exit=%d" % (h, c))


def summary(log, status, code):
    log.advance(2)
    log.add("=" * 72)
    log.add(" JOB SUMMARY")
    log.add("=" * 72)
    log.add(" Job:      %d %s" % (log.job_id, log.name))
    log.add(" Status:   %s (exit %d)" % (status, code))
    log.add(" Finished: %s" % ts(log.t, False))
    log.add(" Log:      /shared/home/alice/maxtext/outputs/%d-%s.log" % (log.job_id, log.name))
    log.add("=" * 72)


def write_seed_layout(base, log, extra_files=None):
    """outputs/<id>-<name>.log beside outputs/<id>-<name>/ with log -> ../<id>-<name>.log"""
    name = "%d-%s" % (log.job_id, log.name)
    out = os.path.join(base, "outputs")
    os.makedirs(os.path.join(out, name), exist_ok=True)
    with open(os.path.join(out, name + ".log"), "w", newline="") as f:
        f.write(log.text())
    link = os.path.join(out, name, "log")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("../%s.log" % name, link)
    for rel, content in (extra_files or {}).items():
        p = os.path.join(out, name, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(content)
    return "outputs/" + name


def fixture(name, description, build, args=None, evidence=None):
    d = os.path.join(FIXTURES, name)
    golden = os.path.join(d, "expected.json")
    keep = open(golden).read() if os.path.exists(golden) else None
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    global LAST_WRITE
    LAST_WRITE = None
    path = build(d)
    case = {"description": description, "path": path}
    case.update(args or {})
    if LAST_WRITE is not None:
        case["mtime"] = LAST_WRITE
    if evidence is not None:
        with open(os.path.join(d, "evidence.json"), "w") as f:
            json.dump(evidence, f, indent=2)
            f.write("\n")
        case["evidence"] = "evidence.json"
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(case, f, indent=2)
        f.write("\n")
    if keep is not None:
        with open(golden, "w") as f:
            f.write(keep)


NODES4 = ["gpu-a017", "gpu-a018", "gpu-a019", "gpu-a020"]
PASS = "steps=5000 per_device_batch_size=2 enable_checkpointing=true checkpoint_period=500 remat_policy=minimal"


def healthy_start(log, restore=None, ray=0, passthrough=PASS, extra_env=()):
    """Header, stages, start-up and MaxText's config dump, consistent with PASSTHROUGH_ARGS."""
    kv = dict(t.split("=", 1) for t in passthrough.split() if "=" in t)
    header(log, passthrough, ray=ray, extra_env=extra_env)
    stages_ok(log)
    jax_startup(log)
    period = int(kv["checkpoint_period"]) if "checkpoint_period" in kv else None
    maxtext_config(log, int(kv.get("steps", 5000)), period, ckpt=kv.get("enable_checkpointing") == "true")
    restore_message(log, restore)


# --- infrastructure failures ------------------------------------------------------------------

def stage_failure(job_id, name, stage, lines, exit_code, summary_code=None):
    def build(d):
        log = Log(job_id, name, NODES4[:2], seed=job_id)
        header(log, PASS)
        stages_ok(log, fail_at=stage, fail_line=lines)
        log.advance(1)
        if exit_code is not None:
            log.add("== %s FAILED (exit=%d)" % (stage, exit_code))
        node_exits(log, [1, 1])
        summary(log, "FAILED", summary_code if summary_code is not None else 1)
        return write_seed_layout(d, log)
    return build


def gen_infrastructure():
    fixture("container-pull-fail", "image pull refused by the registry",
            stage_failure(9101, "llama3-8b", "Docker pull",
                          ["[pull] gpu-a017: Error response from daemon: Head \"https://registry.example.com/v2/ml/maxtext-rocm/manifests/2026.11.2\": unauthorized: authentication required",
                           "[ERROR] Pull failed for registry.example.com/ml/maxtext-rocm:2026.11.2 on gpu-a017 (attempt 3/3)"], 1),
            {"slurm_state": "none", "now": T0 + 3600})
    fixture("container-load-fail", "docker load of the image tarball printed no image",
            stage_failure(9102, "llama3-8b", "Docker pull",
                          ["[pull] loading /shared/images/maxtext-rocm-2026.11.2.tar.gz",
                           "[pull] open /var/lib/docker/tmp/docker-import-1849213/repositories: no such file or directory",
                           "[ERROR] Unable to determine image name or ID from docker load output"], 1),
            {"slurm_state": "none", "now": T0 + 3600})
    fixture("no-gpu", "the container saw no GPU devices", stage_failure(
        9103, "llama3-8b", "ECC check",
        ["WARNING: No GPU devices detected in container on gpu-a018 (check --device=/dev/kfd --device=/dev/dri)"], 1),
        {"slurm_state": "none", "now": T0 + 3600})

    def launch_failure(job_id, name, nodes, lines, exit_code, node_codes):
        """The stages pass, then the training launch prints `lines` (text, or (rank, text)) and fails."""
        def build(d):
            log = Log(job_id, name, nodes, seed=job_id)
            header(log, PASS)
            stages_ok(log)
            log.add("== Training START %s" % ts(log.t, False))
            for l in lines:
                if isinstance(l, tuple):
                    log.task(*l)
                else:
                    log.add(l)
            log.add("== Training FAILED (exit=%d)" % exit_code)
            node_exits(log, node_codes)
            summary(log, "FAILED", exit_code)
            return write_seed_layout(d, log)
        return build

    fixture("nccl-nic-fail", "no usable NIC for NCCL on one node", launch_failure(
        9104, "llama3-70b", NODES4,
        [(r, "%s:%d:%d [0] NCCL INFO NCCL_SOCKET_IFNAME not set, probing interfaces" % (NODES4[r], 3100 + r, 3100 + r))
         for r in range(4)]
        + [(2, "gpu-a019:3102:3102 [0] NCCL FATAL choose_nccl_socket_ifname.sh: Failed to auto-detect NCCL_SOCKET_IFNAME; ABORTING"),
           "srun: error: gpu-a019: task 2: Exited with exit code 1"], 1, [0, 0, 1, 0]),
        {"slurm_state": "none", "now": T0 + 3600})
    fixture("port-fail", "no free port for the JAX coordinator", launch_failure(
        9105, "llama3-8b", NODES4[:2],
        ["[launcher] probing ports 12355-12399 on gpu-a017 for the JAX coordinator",
         "FATAL: Could not find a free port for JAX coordinator on gpu-a017 (12355-12399 all in use)"], 1, [1, 1]),
        {"slurm_state": "none", "now": T0 + 3600})
    fixture("srun-launch-fail", "slurmd refused the training step: the job credential had expired", launch_failure(
        9164, "llama3-8b", NODES4[:2],
        ["srun: error: Task launch for StepId=9164.0 failed on node gpu-a018: Job credential expired",
         "srun: error: Application launch failed: Job credential expired",
         "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
         "srun: error: Timed out waiting for job step to complete"], 1, [1, 1]),
        {"slurm_state": "none", "now": T0 + 3600})
    fixture("rendezvous-fail", "torch elastic's rendezvous timed out: the second node never joined", launch_failure(
        9165, "llama3-8b", NODES4[:2],
        [(0, "Traceback (most recent call last):"),
         (0, '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", line 1090, in next_rendezvous'),
         (0, "    self._op_executor.run(join_op, deadline)"),
         (0, "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"),
         "srun: error: gpu-a017: task 0: Exited with exit code 1"], 1, [1, 0]),
        {"slurm_state": "none", "now": T0 + 3600})
    fixture("model-not-found", "model config name did not resolve", launch_failure(
        9106, "llama3-70b-instruct", NODES4[:1],
        ["!!! Unknown model: llama3-70b-instruct (no configs/llama3-70b-instruct*.gpu.yml)",
         "!!! Model name resolution failed; candidates: llama3-70b, llama3.1-70b"], 2, [2]),
        {"slurm_state": "none", "now": T0 + 3600})

    fixture("patch-branch-fail", "hotfix branch checkout failed in the container", stage_failure(
        9107, "llama3-8b", "ECC check",
        ["[patch] fetching hotfix/rccl-allgather-2026-11 from origin",
         "error: pathspec 'hotfix/rccl-allgather-2026-11' did not match any file(s) known to git",
         "[FAIL] Failed to check out hotfix/rccl-allgather-2026-11 in /opt/maxtext"], 1),
        {"slurm_state": "none", "now": T0 + 3600})

    def ray_fail(d):
        log = Log(9108, "llama3-8b", NODES4[:2], seed=8)
        header(log, "steps=40 enable_checkpointing=false", ray=1)
        stages_ok(log)
        log.add("[Ray] starting HEAD on gpu-a017 (port 6379)")
        log.add("[Ray] HEAD failed to start: ValueError: Can't find a `node_ip_address.json` file; falling back to RAY=0")
        jax_startup(log)
        maxtext_config(log, 40, None, ckpt=False)
        steps(log, 0, 39)
        node_exits(log, [0, 0])
        summary(log, "SUCCESS", 0)
        return write_seed_layout(d, log)
    fixture("ray-start-fail", "Ray head failed to start, training fell back and completed", ray_fail,
            {"slurm_state": "none", "now": T0 + 7200})

    for stage, cls, jid in (("Preflight", "preflight-timeout", 9111), ("Docker pull", "pull-timeout", 9112),
                            ("ECC check", "ecc-timeout", 9113)):
        fixture(cls, "%s stage timed out" % stage, stage_failure(
            jid, "llama3-8b", stage,
            ["[%s] still waiting on gpu-a018 after 900s" % stage.lower(), "== %s TIMEOUT after 900s" % stage], None, 124),
            {"slurm_state": "none", "now": T0 + 7200})

    def train_timeout(d):
        log = Log(9114, "llama3-70b", NODES4, seed=14)
        healthy_start(log)
        steps(log, 0, 240, seconds=9.8)
        log.add("== Training TIMEOUT after 259200s")
        node_exits(log, [124, 124, 124, 124])
        summary(log, "FAILED", 124)
        return write_seed_layout(d, log)
    fixture("train-timeout", "training stage exceeded its wall-clock limit", train_timeout,
            {"slurm_state": "none", "now": T0 + 7200})

    def stage_fail(d):
        log = Log(9115, "llama3-8b", NODES4[:2], seed=15)
        header(log, PASS)
        log.add("== Preflight START %s" % ts(log.t, False))
        log.add("[preflight] gpu-a018: /shared/home not mounted")
        log.add("== Preflight FAILED (exit=3)")
        node_exits(log, [0, 3])
        summary(log, "FAILED", 3)
        return write_seed_layout(d, log)
    fixture("stage-fail", "preflight failed (not a timeout)", stage_fail, {"slurm_state": "none", "now": T0 + 3600})


# --- training failures ----------------------------------------------------------------------------

def traceback(log, rank, frames, exception):
    log.task(rank, "Traceback (most recent call last):")
    for f in frames:
        log.task(rank, "  File \"%s\", line %d, in %s" % f)
        log.task(rank, "    %s" % "state, metrics = p_train_step(state, example_batch, nextrng)")
    log.task(rank, exception)


MAXTEXT_FRAMES = [("/opt/maxtext/MaxText/train.py", 1012, "<module>"), ("/opt/maxtext/MaxText/train.py", 1008, "main"),
                  ("/opt/maxtext/MaxText/train.py", 903, "train_loop")]


def gen_training():
    def oom_cascade(d):
        log = Log(7877, "llama3-70b", NODES4, seed=77)
        healthy_start(log)
        steps(log, 0, 212, seconds=9.6, every_rank=True)
        log.advance(4)
        log.add("slurmstepd: error: Detected 1 oom_kill event in StepId=7877.0. Some of the step tasks have been OOM Killed.")
        log.add("srun: error: gpu-a019: task 2: Out Of Memory")
        log.advance(600)
        for r in (0, 1, 3):
            log.task(r, "%s:%d:%d [0] NCCL WARN Timeout waiting for the completion of an all-reduce (peer rank 16 unreachable)" % (log.host_of(r), 2231 + r, 2240 + r))
        log.advance(30)
        log.task(0, "%s 2231 coordination_service.cc:1021] The following tasks are unhealthy (stopped sending heartbeats):" % glog(log.t, "E"))
        log.task(0, "/job:jax_worker/replica:0/task:2")
        log.task(0, "The tasks have crashed. Check the task logs for an earlier error to debug further.")
        log.add("srun: error: gpu-a017: task 0: Exited with exit code 1")
        log.add("srun: error: gpu-a018: task 1: Exited with exit code 1")
        log.add("srun: error: gpu-a020: task 3: Exited with exit code 1")
        log.add("== Training FAILED (exit=1)")
        node_exits(log, [1, 1, 137, 1])
        summary(log, "FAILED", 1)
        return write_seed_layout(d, log)
    fixture("cascade-oom-nccl-heartbeat", "host OOM on one node, NCCL timeouts elsewhere, then a heartbeat timeout",
            oom_cascade, {"slurm_state": "none", "now": T0 + 86400})

    def heartbeat(d):
        log = Log(8044, "llama3-405b", NODES4, seed=44)
        healthy_start(log, restore=None)
        steps(log, 0, 1530, seconds=12.1)
        log.advance(5)
        log.task(0, "%s 2231 coordination_service.cc:1021] UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):" % glog(log.t, "E"))
        log.task(0, "/job:jax_worker/replica:0/task:1")
        log.task(0, "/job:jax_worker/replica:0/task:3")
        log.task(0, "The tasks have crashed. Check the task logs for an earlier error to debug further.")
        log.advance(1)
        for r in (1, 3):
            log.task(r, "%s %d client.cc:403] Polled error from coordination service: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats)" % (glog(log.t, "E"), 2231 + r))
            log.task(r, "%s %d client.cc:446] Terminating process because the JAX distributed service detected fatal errors. This most likely indicates that another task died; see the other task logs for more details." % (glog(log.t, "F"), 2231 + r))
        for h in log.nodes:
            log.add("srun: error: %s: task %d: Aborted (core dumped)" % (h, log.nodes.index(h)))
        log.add("== Training FAILED (exit=134)")
        node_exits(log, [134, 134, 134, 134])
        summary(log, "FAILED", 134)
        return write_seed_layout(d, log)
    fixture("heartbeat-false-positive", "JAX heartbeat timeout whose accused tasks logged their own death", heartbeat,
            {"slurm_state": "none", "now": T0 + 86400})

    def oom_gpu(d):
        log = Log(9121, "llama3-70b", NODES4, seed=21)
        healthy_start(log)
        log.advance(90)
        traceback(log, 1, MAXTEXT_FRAMES,
                  "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 23.44GiB.")
        log.task(1, "--------------------")
        log.task(1, "For simplicity, JAX has removed its internal frames from the traceback of the following exception. Set JAX_TRACEBACK_FILTERING=off to include these.")
        log.add("srun: error: gpu-a018: task 1: Exited with exit code 1")
        log.add("== Training FAILED (exit=1)")
        node_exits(log, [0, 1, 0, 0])
        summary(log, "FAILED", 1)
        return write_seed_layout(d, log)
    fixture("oom-gpu", "XLA ran out of GPU memory at the first step", oom_gpu, {"slurm_state": "none", "now": T0 + 7200})

    def nccl(d):
        log = Log(9122, "gpt-neox-20b", ["gpu-b001", "gpu-b002"], tasks_per_node=2, seed=22)
        header(log, "steps=20000 enable_checkpointing=false")
        log.add("== Training START %s" % ts(log.t, False))
        for r in range(4):
            log.task(r, "[rank%d]:[W%s ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank %d] using GPU %d to perform barrier as devices used by this process are currently unknown." % (r, glog(log.t)[1:], r, r % 2))
        steps(log, 0, 60, seconds=1.4, compile_seconds=11, stamp=True)
        log.advance(600)
        log.task(2, "[rank2]:[E%s ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600034 milliseconds before timing out." % glog(log.t)[1:])
        log.task(2, "[rank2]:[E%s ProcessGroupNCCL.cpp:2263] [PG ID 0 PG GUID 0(default_pg) Rank 2]  failure detected by watchdog at work sequence id: 48213 PG status: last enqueued work: 48214, last completed work: 48212" % glog(log.t)[1:])
        log.task(2, "[rank2]:[E%s ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 2] Process group watchdog thread terminated with exception: [Rank 2] Watchdog caught collective operation timeout" % glog(log.t)[1:])
        log.add("srun: error: gpu-b002: task 2: Aborted (core dumped)")
        log.add("srun: error: gpu-b001: tasks 0-1: Exited with exit code 1")
        return write_seed_layout(d, log)
    fixture("nccl-timeout", "PyTorch NCCL watchdog timeout, no JOB SUMMARY, Slurm says FAILED", nccl,
            {"slurm_state": "FAILED", "now": T0 + 7200})

    def xla(d):
        log = Log(8101, "deepseek-v3-lite", NODES4[:2], seed=101)
        healthy_start(log)
        log.advance(40)
        traceback(log, 0, MAXTEXT_FRAMES, "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to compile: Failed to run ROCm-specific passes: HloModule jit_train_step has an unsupported all-to-all layout")
        log.add("Training subprocess exited with code 1")
        log.add("== Training FAILED (exit=1)")
        node_exits(log, [1, 0])
        summary(log, "FAILED", 1)
        return write_seed_layout(d, log)
    fixture("xla-compile-fail", "XLA compile failure ending a traceback; the traceback is not the root cause", xla,
            {"slurm_state": "none", "now": T0 + 7200})

    def pyexc(d):
        log = Log(9124, "llama3-8b", NODES4[:2], seed=24)
        healthy_start(log)
        steps(log, 0, 14, seconds=3.2)
        traceback(log, 0, MAXTEXT_FRAMES + [("/opt/maxtext/MaxText/input_pipeline/_grain_data_processing.py", 211, "__next__")],
                  "ValueError: Expected a batch of 64 sequences, got 63 (data file /shared/data/c4/train-00017-of-01024 is truncated)")
        log.add("Training subprocess exited with code 1")
        log.add("== Training FAILED (exit=1)")
        node_exits(log, [1, 1])
        summary(log, "FAILED", 1)
        return write_seed_layout(d, log)
    fixture("python-exception", "an unhandled ValueError in the input pipeline", pyexc, {"slurm_state": "none", "now": T0 + 7200})

    def segv(d):
        log = Log(9125, "llama3-8b", NODES4[:2], seed=25)
        healthy_start(log)
        steps(log, 0, 37, seconds=3.2)
        log.task(1, "Fatal Python error: Segmentation fault")
        log.task(1, "")
        log.task(1, "Thread 0x00007f3b2d7fe640 (most recent call first):")
        log.task(1, "  File \"/usr/local/lib/python3.10/dist-packages/jax/_src/interpreters/pxla.py\", line 1229 in __call__")
        log.add("srun: error: gpu-a018: task 1: Segmentation fault (core dumped)")
        log.add("Training subprocess killed by signal 11 (SIGSEGV)")
        log.add("== Training FAILED (exit=139)")
        node_exits(log, [143, 139])
        summary(log, "FAILED", 139)
        return write_seed_layout(d, log)
    fixture("signal-kill", "a rank segfaulted", segv, {"slurm_state": "none", "now": T0 + 7200})

    def subproc(d):
        log = Log(9126, "llama3-8b", NODES4[:1], seed=26)
        healthy_start(log)
        steps(log, 0, 3, seconds=3.2)
        log.add("Training subprocess exited with code 2")
        log.add("== Training FAILED (exit=2)")
        node_exits(log, [2])
        summary(log, "FAILED", 2)
        return write_seed_layout(d, log)
    fixture("subprocess-fail", "training exited non-zero with nothing else to go on", subproc,
            {"slurm_state": "none", "now": T0 + 7200})

    def actor(d):
        log = Log(9127, "llama3-8b", NODES4[:2], seed=27)
        healthy_start(log, ray=1)
        steps(log, 0, 22, seconds=3.2)
        log.add("(MaxTextTrainer pid=48213, ip=10.1.0.18) Actor failed: ray::MaxTextTrainer.train_step() (pid=48213, ip=10.1.0.18, actor_id=7d4e1b2c9a0f3e5d6c8b1a2d01000000)")
        log.add("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.")
        log.add("\tclass_name: MaxTextTrainer")
        log.add("Training subprocess exited with code 1")
        node_exits(log, [1, 1])
        summary(log, "FAILED", 1)
        return write_seed_layout(d, log)
    fixture("actor-fail", "a Ray actor died", actor, {"slurm_state": "none", "now": T0 + 7200})

    def dataloader(d):
        log = Log(9128, "vit-h14", ["gpu-c001"], tasks_per_node=2, seed=28)
        header(log, "steps=100000 enable_checkpointing=false")
        log.add("== Training START %s" % ts(log.t, False))
        steps(log, 0, 12, seconds=0.8, compile_seconds=4)
        log.task(0, "[rank0]: Traceback (most recent call last):")
        log.task(0, "[rank0]:   File \"/opt/conda/lib/python3.11/site-packages/torch/utils/data/dataloader.py\", line 1251, in _try_get_data")
        log.task(0, "[rank0]:     data = self._data_queue.get(timeout=timeout)")
        log.task(0, "[rank0]: RuntimeError: DataLoader worker (pid 91342) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.")
        log.add("srun: error: gpu-c001: task 0: Exited with exit code 1")
        return write_seed_layout(d, log)
    fixture("dataloader-fail", "a DataLoader worker died of a bus error (/dev/shm too small)", dataloader,
            {"slurm_state": "FAILED", "now": T0 + 7200})

    def storage(d):
        log = Log(9129, "llama3-70b", NODES4, seed=29)
        healthy_start(log)
        steps(log, 0, 500, seconds=9.6, ckpt_period=None)
        traceback(log, 0, [("/opt/maxtext/MaxText/checkpointing.py", 301, "save_checkpoint")],
                  "OSError: [Errno 28] No space left on device: '/shared/home/alice/maxtext/outputs/ckpt-llama3-70b/checkpoints/500/items/.tmp'")
        log.add("== Training FAILED (exit=1)")
        node_exits(log, [1, 1, 1, 1])
        summary(log, "FAILED", 1)
        return write_seed_layout(d, log)
    fixture("storage-full", "checkpoint save hit a full file system", storage, {"slurm_state": "none", "now": T0 + 86400})

    def stale_handle(d):
        log = Log(9160, "llama3-70b", NODES4, seed=60)
        healthy_start(log)
        steps(log, 0, 500, seconds=9.6, ckpt_period=None)
        traceback(log, 2, [("/opt/maxtext/MaxText/checkpointing.py", 301, "save_checkpoint")],
                  "OSError: [Errno 116] Stale file handle: '/shared/home/alice/maxtext/outputs/ckpt-llama3-70b/checkpoints/500'")
        log.add("== Training FAILED (exit=1)")
        node_exits(log, [1, 1, 1, 1])
        summary(log, "FAILED", 1)
        return write_seed_layout(d, log)
    fixture("storage-error", "checkpoint save hit a stale NFS file handle on one node", stale_handle,
            {"slurm_state": "none", "now": T0 + 86400})

    def gpu_error(d):
        log = Log(9130, "llama3-8b", NODES4[:2], seed=30)
        healthy_start(log)
        steps(log, 0, 88, seconds=3.2)
        log.task(1, "Memory access fault by GPU node-4 (Agent handle: 0x5581b3f0a2c0) on address 0x7f2a1c000000. Reason: Page not present or supervisor privilege.")
        log.add("srun: error: gpu-a018: task 1: Aborted (core dumped)")
        log.add("== Training FAILED (exit=134)")
        node_exits(log, [143, 134])
        summary(log, "FAILED", 134)
        return write_seed_layout(d, log)
    fixture("gpu-error", "a GPU memory access fault in one rank", gpu_error, {"slurm_state": "none", "now": T0 + 7200})

    def gpu_hardware(d):
        log = Log(9161, "llama3-8b", NODES4[:2], seed=61)
        healthy_start(log)
        steps(log, 0, 140, seconds=3.2)
        traceback(log, 1, MAXTEXT_FRAMES,
                  "RuntimeError: CUDA error: uncorrectable ECC error encountered")
        log.add("srun: error: gpu-a018: task 1: Exited with exit code 1")
        log.add("== Training FAILED (exit=1)")
        node_exits(log, [143, 1])
        summary(log, "FAILED", 1)
        return write_seed_layout(d, log)
    fixture("gpu-hardware-error", "a rank's GPU reported an uncorrectable ECC error", gpu_hardware,
            {"slurm_state": "none", "now": T0 + 7200})

    def device_assert(d):
        log = Log(9162, "vit-h14", ["gpu-c001"], tasks_per_node=2, seed=62)
        header(log, "steps=100000 enable_checkpointing=false")
        log.add("== Training START %s" % ts(log.t, False))
        steps(log, 0, 6, seconds=0.8, compile_seconds=4)
        log.task(0, "[rank0]: /opt/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.")
        log.task(0, "[rank0]: Traceback (most recent call last):")
        log.task(0, "[rank0]:   File \"/workspace/train.py\", line 188, in <module>")
        log.task(0, "[rank0]:     loss = criterion(logits, labels)")
        log.task(0, "[rank0]: RuntimeError: CUDA error: device-side assert triggered")
        log.add("srun: error: gpu-c001: task 0: Exited with exit code 1")
        return write_seed_layout(d, log)
    fixture("gpu-device-assert", "a label outside the model's classes tripped a CUDA kernel assertion",
            device_assert, {"slurm_state": "FAILED", "now": T0 + 7200})

    def ray_node(d):
        log = Log(9163, "llama3-8b", NODES4[:2], seed=63)
        healthy_start(log, ray=1)
        steps(log, 0, 40, seconds=3.2)
        log.add("%s WARNING worker.py:2037 -- The node with node id: 5c1e9a7d0b3f and address: 10.1.0.19 and node name: 10.1.0.19 has been marked dead because the detector has missed too many heartbeats from it. This can happen when a \t(1) raylet crashes unexpectedly (OOM, preempted node, etc.) " % ts(log.t))
        log.add("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.")
        log.add("Training subprocess exited with code 1")
        node_exits(log, [1, 1])
        summary(log, "FAILED", 1)
        return write_seed_layout(d, log)
    fixture("ray-node-died", "Ray marked a worker node dead; its actor died with it", ray_node,
            {"slurm_state": "none", "now": T0 + 7200})


# --- job-level status -----------------------------------------------------------------------------

def gen_status():
    def cancel_after_hang(d):
        log = Log(7901, "mixtral-8x7b", NODES4, seed=901)
        healthy_start(log, passthrough="steps=2000 per_device_batch_size=4 enable_checkpointing=true")
        steps(log, 0, 316, seconds=7.9, ckpt_period=200)
        # Hung in a collective: only non-training noise for hours.
        for k in range(6):
            log.advance(1800)
            log.task(k % 4, "%s %d gpu_transfer_manager.cc:244] ROCm buffer pool: 2 of 64 blocks in use" % (glog(log.t), 2231 + k % 4))
        log.advance(600)
        log.add("slurmstepd: error: *** JOB 7901 ON gpu-a017 CANCELLED AT %s ***" % iso(log.t))
        log.add("srun: Job step aborted: Waiting up to 32 seconds for job step to finish.")
        for r, h in enumerate(log.nodes):
            log.add("srun: error: %s: task %d: Exited with exit code 143" % (h, r))
        log.add("srun: Terminating StepId=7901.0")
        log.add("Error response from daemon: cannot remove container \"maxtext-7901-%d\": could not kill container: tried to kill container, but did not receive an exit event" % 2)
        node_exits(log, [143, 143, 143, 143])
        summary(log, "FAILED", 143)
        return write_seed_layout(d, log)
    fixture("cancel-after-hang", "scancel hours after training stopped: the hang is the cause", cancel_after_hang,
            {"slurm_state": "none", "now": T0 + 86400})

    def plain_cancel(d):
        log = Log(9131, "llama3-8b", NODES4[:2], seed=31)
        healthy_start(log)
        steps(log, 0, 120, seconds=3.2)
        log.advance(2)
        log.add("slurmstepd: error: *** JOB 9131 ON gpu-a017 CANCELLED AT %s ***" % iso(log.t))
        log.add("srun: Job step aborted: Waiting up to 32 seconds for job step to finish.")
        log.add("srun: error: gpu-a017: task 0: Exited with exit code 143")
        log.add("srun: error: gpu-a018: task 1: Exited with exit code 143")
        node_exits(log, [143, 143])
        summary(log, "FAILED", 143)
        return write_seed_layout(d, log)
    fixture("cancelled", "a clean scancel while training advanced", plain_cancel, {"slurm_state": "none", "now": T0 + 86400})

    def time_limit(d):
        log = Log(8012, "gemma2-27b", NODES4, seed=12)
        healthy_start(log, passthrough="steps=6000 per_device_batch_size=2 enable_checkpointing=true", restore=1200)
        steps(log, 1201, 1745, seconds=11.3, ckpt_period=200)
        log.advance(5)
        log.add("slurmstepd: error: *** JOB 8012 ON gpu-a017 CANCELLED AT %s DUE TO TIME LIMIT ***" % iso(log.t))
        log.add("srun: Job step aborted: Waiting up to 32 seconds for job step to finish.")
        return write_seed_layout(d, log, {"ray_logs/session_2026-11-21_10-02-11_482913_2231/worker-5c1f2e.out":
                                         "restoring from this run's directory step 1200\n"})
    fixture("time-limit-restored", "restored from checkpoint 1200, then hit the Slurm time limit", time_limit,
            {"slurm_state": "none", "now": T0 + 86400})

    def preempt(d):
        log = Log(9132, "llama3-8b", NODES4[:2], seed=32)
        healthy_start(log, passthrough="steps=3000 enable_checkpointing=true")
        steps(log, 0, 450, seconds=3.2, ckpt_period=200)
        log.advance(3)
        log.add("slurmstepd: error: *** JOB 9132 ON gpu-a017 CANCELLED AT %s DUE TO PREEMPTION ***" % iso(log.t))
        return write_seed_layout(d, log)
    fixture("preempted", "preempted by a higher-priority job", preempt, {"slurm_state": "none", "now": T0 + 86400})

    def node_fail(d):
        log = Log(9133, "llama3-70b", NODES4, seed=33)
        healthy_start(log)
        steps(log, 0, 75, seconds=9.6)
        log.advance(120)
        log.add("srun: error: Node failure on gpu-a020")
        log.add("srun: error: gpu-a017: task 0: Killed")
        node_exits(log, [137, 137, 137, 255])
        summary(log, "FAILED", 1)
        return write_seed_layout(d, log)
    fixture("node-fail", "Slurm lost a node mid-training", node_fail, {"slurm_state": "none", "now": T0 + 86400})

    def unknown(d):
        log = Log(9134, "llama3-70b", NODES4, seed=34)
        healthy_start(log)
        steps(log, 0, 433, seconds=9.6)
        log.task(0, "[%s] completed step: 434, seconds: 9.61" % ts(log.t + 9.6, False))
        path = write_seed_layout(d, log)
        # Killed mid-line: the log has no final line break.
        p = os.path.join(d, path + ".log")
        data = open(p).read().rstrip("\n")
        data = data[: data.rfind(", seconds")]
        open(p, "w").write(data)
        return path
    fixture("unknown-death", "no JOB SUMMARY, steps stopped, Slurm says the job ended, log cut mid-line", unknown,
            {"slurm_state": "ENDED", "now": T0 + 86400})

    def hanging(d):
        log = Log(9135, "llama3-70b", NODES4, seed=35)
        healthy_start(log)
        steps(log, 0, 316, seconds=9.6)
        log.advance(3600)
        log.task(2, "%s 2233 gpu_transfer_manager.cc:244] ROCm buffer pool: 2 of 64 blocks in use" % glog(log.t))
        return write_seed_layout(d, log)
    last = T0 + 139 + 8 + 95 + 316 * 9.6  # when step 316 is logged (stages, start-up, compile, steps)
    fixture("hanging", "Slurm RUNNING, steps stopped an hour ago (other output continues)", hanging,
            {"slurm_state": "RUNNING", "now": int(last + 3 * 3600)})

    def running(d):
        log = Log(9136, "llama3-70b", NODES4, seed=36)
        healthy_start(log)
        steps(log, 0, 316, seconds=9.6)
        return write_seed_layout(d, log)
    fixture("running", "Slurm RUNNING, last step seconds ago", running, {"slurm_state": "RUNNING", "now": int(last + 30)})

    def completed_ray(d):
        log = Log(7950, "llama3-8b", NODES4[:2], seed=50)
        header(log, "steps=300 per_device_batch_size=4 enable_checkpointing=true checkpoint_period=100", ray=1)
        stages_ok(log)
        log.add("[Ray] HEAD started on gpu-a017:6379 (dashboard 127.0.0.1:8265)")
        log.add("[Prometheus] Started on port 9191 (9190 was in use)")
        log.add("[Ray] To reach the dashboards from your laptop run:")
        log.add("    ssh -L 8265:localhost:8265 -L 9191:localhost:9191 -L 6006:localhost:6006 -J alice@login.example.com alice@gpu-a017")
        jax_startup(log)
        maxtext_config(log, 300, 100)
        restore_message(log, None)
        steps(log, 0, 299, seconds=3.1, ckpt_period=100)
        node_exits(log, [0, 0])
        summary(log, "SUCCESS", 0)
        return write_seed_layout(d, log, {"prometheus/.keep": ""})
    fixture("completed-ray-tunnel", "RAY=1 job that completed; tunnel, head host and Prometheus port from the log",
            completed_ray, {"slurm_state": "none", "now": T0 + 86400})

    def harmless(d):
        log = Log(9137, "llama3-8b", NODES4[:2], seed=37)
        healthy_start(log, passthrough="steps=20 enable_checkpointing=false")
        steps(log, 0, 19, seconds=3.2)
        log.task(0, "Error response from daemon: cannot remove container \"maxtext-9137-0\": could not kill container: tried to kill container, but did not receive an exit event")
        log.task(1, "E1121 11:00:00.000000 2232 pjrt.cc:12] INTERNAL: CUDA error: Could not initialize CUDA driver (probe)")
        node_exits(log, [0, 0])
        summary(log, "SUCCESS", 0)
        return write_seed_layout(d, log)
    fixture("harmless-only", "a healthy job printing every known-harmless line: no findings at all", harmless,
            {"slurm_state": "none", "now": T0 + 86400})

    def evidence_oom(d):
        log = Log(9140, "llama3-70b", NODES4, seed=40)
        healthy_start(log)
        steps(log, 0, 180, seconds=9.6)
        node_exits(log, [1, 1, 137, 1])
        summary(log, "FAILED", 1)
        return write_seed_layout(d, log)
    kill = T0 + 3600
    def task(host, rank, status, pid):
        return {"host": host, "job_id": 9140, "step": "0", "task": 0, "rank": rank, "pid": pid, "wait_status": status}
    ev = {
        "schema_version": 1,
        "job": {"job_id": 9140, "name": "llama3-70b", "user": "alice", "state": "FAILED", "wait_status": 256,
                "nodes": NODES4, "batch_host": "gpu-a017", "start_time": T0, "end_time": T0 + 4300, "mode": "basic",
                "source": "slurmctld"},
        "nodes": [
            {"host": "gpu-a017", "reachable": True, "tasks": [task("gpu-a017", 0, 256, 41001)], "events": [],
             "verdict": {"host": "gpu-a017", "verdict": "healthy", "reasons": []}},
            {"host": "gpu-a018", "reachable": True, "tasks": [task("gpu-a018", 1, 256, 41002)], "events": [],
             "verdict": {"host": "gpu-a018", "verdict": "healthy", "reasons": []}},
            {"host": "gpu-a019", "reachable": True, "tasks": [task("gpu-a019", 2, 9, 41003)],
             "events": [{"id": "3b1f0c2e:18812", "kind": "oom-kill", "severity": "critical", "host": "gpu-a019",
                         "time_usec": kill * 1000000, "last_usec": kill * 1000000, "count": 1, "rule": "oom-kill-memcg",
                         "summary": "Memory cgroup out of memory: Killed process 41003 (python3)", "pid": 41003,
                         "task": "python3", "job_id": 9140, "step": "0",
                         "cgroup": "/system.slice/slurmstepd.scope/job_9140/step_0/user/task_0",
                         "lines": ["Memory cgroup out of memory: Killed process 41003 (python3) total-vm:912345678kB, anon-rss:501234567kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:987654kB oom_score_adj:0"]}],
             "verdict": {"host": "gpu-a019", "verdict": "healthy", "reasons": []}},
            {"host": "gpu-a020", "reachable": False, "error": "connection timed out after 5s", "tasks": [], "events": []},
        ],
    }
    fixture("evidence-oom-host", "log silent; the agent saw rank 2 SIGKILLed and an OOM kill on its node", evidence_oom,
            {"slurm_state": "", "now": T0 + 86400}, evidence=ev)

    def evidence_gpu(d):
        log = Log(9141, "llama3-70b", NODES4, seed=41)
        healthy_start(log)
        steps(log, 0, 90, seconds=9.6)
        log.advance(600)
        for r in (0, 1, 3):
            log.task(r, "%s:%d:%d [0] NCCL WARN Timeout waiting for the completion of an all-reduce" % (log.host_of(r), 2231 + r, 2240 + r))
        log.task(2, "HW Exception by GPU node-5 (Agent handle: 0x55f0c1d2e3a0) reason :GPU Hang")
        node_exits(log, [1, 1, 134, 1])
        summary(log, "FAILED", 1)
        return write_seed_layout(d, log)
    ue = T0 + 1200
    ev2 = {
        "schema_version": 1,
        "job": {"job_id": 9141, "name": "llama3-70b", "user": "alice", "state": "FAILED", "nodes": NODES4,
                "start_time": T0, "end_time": T0 + 2400},
        "nodes": [
            {"host": "gpu-a019", "reachable": True,
             "tasks": [{"host": "gpu-a019", "job_id": 9141, "step": "0", "task": 0, "rank": 2, "pid": 51003, "wait_status": 134}],
             "events": [{"id": "77aa:901", "kind": "gpu-ras-uncorrectable", "severity": "critical", "host": "gpu-a019",
                         "time_usec": ue * 1000000, "count": 1, "rule": "amdgpu-ras-ue", "block": "umc",
                         "device": "0000:c1:00.0", "summary": "uncorrectable ECC error in HBM (umc) on 0000:c1:00.0",
                         "action": "drain",
                         "lines": ["amdgpu 0000:c1:00.0: amdgpu: 1 uncorrectable hardware errors detected in umc block"]}],
             "verdict": {"host": "gpu-a019", "verdict": "drain-recommended",
                         "reasons": [{"reason": "uncorrectable ECC error on GPU 0000:c1:00.0", "action": "drain",
                                      "event_ids": ["77aa:901"]}]}},
        ],
    }
    fixture("evidence-hardware-fault", "a GPU UE on one node; NCCL timeouts elsewhere are its consequence", evidence_gpu,
            {"slurm_state": "", "now": T0 + 86400}, evidence=ev2)


def gen_pace():
    """Issue 28: a rank that falls behind and the job's step time that follows it."""
    nodes = ["gpu-b001", "gpu-b002"]

    def straggler(d):
        log = Log(9150, "llama3-8b", nodes, tasks_per_node=4, seed=50)
        healthy_start(log, passthrough="steps=300 per_device_batch_size=2 enable_checkpointing=true checkpoint_period=100")
        # Every rank prints every step with its own TFLOP/s; from step 150 on, rank 5 (on
        # gpu-b002) computes at 70% of the others' pace and every rank's step time rises by 20%.
        for s in range(0, 300):
            slow = s >= 150
            dt = 95.0 if s == 0 else (11.4 if slow else 9.5) + log.rng.uniform(-0.1, 0.1)
            if s > 0 and s % 100 == 0:
                dt *= 3  # the synchronous checkpoint save
            log.advance(dt)
            for r in range(log.ntasks):
                tflops = (281.0 if slow and r == 5 else 401.2) + log.rng.uniform(-2, 2)
                log.task(r, "[%s] completed step: %d, seconds: %.3f, TFLOP/s/device: %.3f, Tokens/s/device: %.3f, total_weights: 1048576, loss: %.3f"
                         % (ts(log.t, False), s, dt, tflops * (9.5 / dt if s > 0 else 1), 3421.9, 11.2 - 0.001 * s))
            if s > 0 and s % 100 == 0:
                log.task(0, "Saved a checkpoint at step %d." % s)
        node_exits(log, [0, 0])
        summary(log, "SUCCESS", 0)
        return write_seed_layout(d, log)

    def task(host, rank, pid):
        return {"host": host, "job_id": 9150, "step": "0", "task": rank % 4, "rank": rank, "pid": pid,
                "wait_status": 0}
    ev = {
        "schema_version": 1,
        "job": {"job_id": 9150, "name": "llama3-8b", "user": "alice", "state": "COMPLETED", "wait_status": 0,
                "nodes": nodes, "batch_host": "gpu-b001", "start_time": T0, "end_time": T0 + 3600, "mode": "basic",
                "source": "slurmctld"},
        "nodes": [
            {"host": h, "reachable": True, "tasks": [task(h, r, 61000 + r) for r in range(4 * i, 4 * i + 4)],
             "events": [], "verdict": {"host": h, "verdict": "healthy", "reasons": []}}
            for i, h in enumerate(nodes)
        ],
    }
    fixture("straggler-slowdown", "rank 5 on gpu-b002 falls to 70% of the others' pace at step 150 and the job's step time rises by 20%",
            straggler, {"slurm_state": "", "now": T0 + 86400}, evidence=ev)


def gen_messy():
    def messy(d):
        log = Log(9150, "llama3-8b", NODES4[:2], seed=50)
        healthy_start(log)
        steps(log, 0, 30, seconds=3.2)
        text = log.text().encode()
        # CRLF line ends, ANSI colour around and inside phrases, NUL bytes and invalid UTF-8 in noise.
        extra = (b"0: \x1b[1;33mWARNING\x1b[0m tokenizer: \xff\xfe\xfd invalid bytes \x00\x00 here\n"
                 b"1: binary junk \x00\x01\x02\x89PNG\r\n\x1a\n"
                 b"1: \x1b[31mjaxlib.xla_extension.XlaRuntimeError: RESOURCE_\x1b[0mEXHAUSTED: Out of memory while trying to allocate 4.00GiB.\x1b[0m\n"
                 b"0: Traceback (most recent call last):\n")
        text = text + extra
        text = text.replace(b"\n", b"\r\n")
        name = "9150-llama3-8b"
        os.makedirs(os.path.join(d, "outputs", name))
        with open(os.path.join(d, "outputs", name + ".log"), "wb") as f:
            f.write(text)
        os.symlink("../%s.log" % name, os.path.join(d, "outputs", name, "log"))
        return "outputs/" + name
    fixture("messy-crlf-ansi-binary", "CRLF, ANSI colours splitting a phrase, NUL and invalid UTF-8, no summary",
            messy, {"slurm_state": "FAILED", "now": T0 + 86400})

    def plain(d):
        # A plain sbatch job: no harness, slurm-<id>.out, torchrun output.
        lines = [
            "+ srun --label torchrun --nproc_per_node=8 train.py --config configs/llama.yaml",
            "0: W1121 10:00:03.120000 140551 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded.",
            "0: [rank0]:[W1121 10:00:09.441000 ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank 0]  using GPU 0 to perform barrier as devices used by this process are currently unknown.",
            "0: [rank3]: Traceback (most recent call last):",
            "0: [rank3]:   File \"/home/bob/train.py\", line 88, in <module>",
            "0: [rank3]:     loss = model(batch).loss",
            "0: [rank3]: torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 191.98 GiB of which 1.12 GiB is free.",
            "0: E1121 10:00:41.001000 140551 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 3 (pid: 7214) of binary: /usr/bin/python3",
            "0: torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "srun: error: gpu-d004: task 0: Exited with exit code 1",
        ]
        with open(os.path.join(d, "slurm-9151.out"), "w") as f:
            f.write("\n".join(lines) + "\n")
        return "slurm-9151.out"
    fixture("plain-sbatch-torch-oom", "plain sbatch + torchrun log (no harness): PyTorch HIP OOM", plain,
            {"slurm_state": "none", "now": T0 + 86400})


def gen_examples():
    """examples/outputs: a small outputs/ folder with a shared checkpoint dir, for the demo."""
    if os.path.exists(EXAMPLES):
        shutil.rmtree(EXAMPLES)
    os.makedirs(EXAMPLES)
    base = os.path.dirname(EXAMPLES)
    for name in ("cascade-oom-nccl-heartbeat", "cancel-after-hang", "completed-ray-tunnel", "time-limit-restored",
                 "heartbeat-false-positive", "xla-compile-fail"):
        src = os.path.join(FIXTURES, name, "outputs")
        for entry in os.listdir(src):
            s = os.path.join(src, entry)
            dst = os.path.join(EXAMPLES, entry)
            if os.path.isdir(s) and not os.path.islink(s):
                shutil.copytree(s, dst, symlinks=True)
            else:
                shutil.copy2(s, dst)
    ckpt = os.path.join(EXAMPLES, "ckpt-llama3-70b", "checkpoints", "200")
    os.makedirs(ckpt)
    with open(os.path.join(ckpt, "_CHECKPOINT_METADATA"), "w") as f:
        f.write('{"format": "orbax", "step": 200}\n')
    os.makedirs(os.path.join(EXAMPLES, "ckpt-llama3-70b", "tensorboard"))
    with open(os.path.join(EXAMPLES, "ckpt-llama3-70b", "tensorboard", "README"), "w") as f:
        f.write("TensorBoard event files of runs sharing this checkpoint directory.\n")
    with open(os.path.join(base, "README.md"), "w") as f:
        f.write("# Example job outputs\n\n"
                "`outputs/` is laid out the way the training harness writes it: a job directory per run "
                "(`<slurm id>-<config>/`, with a `log` symlink to `../<slurm id>-<config>.log`), and a shared "
                "checkpoint directory without a `log` symlink (`ckpt-llama3-70b/`), which triage skips.\n\n"
                "Try:\n\n"
                "    slurm-triage analyze --slurm-state none examples/outputs\n"
                "    slurm-triage analyze --slurm-state none examples/outputs/7901-mixtral-8x7b\n\n"
                "The logs are generated by tests/analyzer/make_fixtures.py from real line shapes.\n")


def main():
    os.makedirs(FIXTURES, exist_ok=True)
    gen_infrastructure()
    gen_training()
    gen_status()
    gen_pace()
    gen_messy()
    gen_examples()
    print("fixtures written to %s; examples to %s" % (FIXTURES, EXAMPLES))


if __name__ == "__main__":
    sys.exit(main())
