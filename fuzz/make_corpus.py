#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/), small valid inputs: real c10d
store frames of both protocol generations, the rendezvous values DynamicRendezvous writes, the
command lines of tests/interop/real_world_lines.json, option values, hostlists and preset
environments. The files are committed; run this again after changing it."""
import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent
MAGIC = 0x3C85F7CE


def u8(v): return struct.pack("<B", v)
def u32(v): return struct.pack("<I", v)
def u64(v): return struct.pack("<Q", v)
def i64(v): return struct.pack("<q", v)
def blob(b): return u64(len(b)) + b
def key(s): return blob(s.encode())


def keys(*names): return u64(len(names)) + b"".join(key(n) for n in names)


def legacy_frames():
    # PyTorch 1.13 TCPStore: SET=0 COMPARE_SET=1 GET=2 ADD=3 CHECK=4 WAIT=5 GETNUMKEYS=6
    # WATCH_KEY=7 DELETE_KEY=8, then APPEND=9 MULTI_GET=10 MULTI_SET=11 CANCEL_WAIT=12.
    return {
        "legacy_set": u8(0) + key("rank_0") + blob(b"10.0.0.1:29500"),
        "legacy_compare_set": u8(1) + key("k") + blob(b"") + blob(b"new"),
        "legacy_get": u8(2) + key("rank_0"),
        "legacy_add": u8(3) + key("init/") + i64(1),
        "legacy_check_wait": u8(4) + keys("a", "b") + u8(5) + keys("a"),
        "legacy_numkeys_watch_delete": u8(6) + u8(7) + key("w") + u8(8) + key("w"),
        "legacy_t1": u8(9) + key("log") + blob(b"x") + u8(10) + keys("a", "b") + u8(11) + u64(2)
        + key("a") + blob(b"1") + key("b") + blob(b"2") + u8(12),
        "legacy_session": u8(3) + key("torchelastic/agent/num_workers") + i64(1) + u8(0)
        + key("torchelastic/agent/rank_0") + blob(b"ok") + u8(5) + keys("torchelastic/agent/rank_0")
        + u8(2) + key("torchelastic/agent/rank_0"),
    }


def validated_frames():
    # PyTorch 2.x: VALIDATE=0 SET=1 COMPARE_SET=2 GET=3 ADD=4 CHECK=5 WAIT=6 GETNUMKEYS=7
    # DELETE_KEY=8 APPEND=9 MULTI_GET=10 MULTI_SET=11 CANCEL_WAIT=12 PING=13 QUEUE_PUSH=14
    # QUEUE_POP=15 QUEUE_LEN=16 LIST_KEYS=17 BARRIER=18; a connection starts with VALIDATE.
    hello = u8(0) + u32(MAGIC) + u8(13) + u32(0x1234)
    return {
        "validated_hello": hello,
        "validated_session": hello + u8(1) + key("/default_pg/0//nccl/0") + blob(b"\x00" * 16)
        + u8(4) + key("/default_pg/0//nccl/cnt") + i64(1) + u8(6) + keys("/default_pg/0//nccl/0")
        + u8(3) + key("/default_pg/0//nccl/0"),
        "validated_all": hello + u8(2) + key("k") + blob(b"a") + blob(b"b") + u8(5) + keys("k")
        + u8(7) + u8(8) + key("k") + u8(9) + key("k") + blob(b"z") + u8(10) + keys("k", "l")
        + u8(11) + u64(1) + key("m") + blob(b"v") + u8(12) + u8(14) + key("q") + blob(b"item")
        + u8(15) + key("q") + u8(16) + key("q") + u8(17) + u8(18) + key("b") + i64(4),
        "validated_partial": hello + u8(1) + key("half") + u64(100) + b"only part",
        "validated_bad_command": hello + u8(200),
    }


def rdzv_values():
    change = {"kind": "failure", "group_rank": 1, "host": "node1",
              "detail": json.dumps({"message": "exit 1", "rank": 3})}
    return {
        "change_failure": json.dumps(change),
        "change_closed": json.dumps({"kind": "closed", "group_rank": -1, "host": "node0",
                                     "detail": "the job has finished"}),
        "node": json.dumps({"host": "node1", "addr": "10.0.0.2", "pid": 4242, "nproc": 4,
                            "store": False}),
        "sealed": json.dumps({"nodes": 2, "world": 8, "restarts": 1, "dropped": [[3, 4]]}),
        "marker": json.dumps({"epoch": 1, "addr": "10.0.0.3:29400", "basis": 4}),
        "integer": "1700000000000",
        "seq": str((1 << 50) + (8 << 20) + 2),
    }


def cli_lines():
    lines = json.loads((ROOT.parent / "tests/interop/real_world_lines.json").read_text())
    out = {}
    for line in lines:
        args = " ".join(a if a and " " not in a else f"'{a}'" for a in line["args"])
        args = args.replace("{nproc}", "2").replace("{port}", "29500").replace("{node_rank}", "0")
        text = args + " /dev/null --lr 0.1"
        env = {k: v.replace("{port}", "29500").replace("{nproc}", "2").replace("{node_rank}", "0")
               .replace("{world_size}", "4") for k, v in line["env"].items()}
        if env:
            text += "\n@env\n" + "".join(f"{k}={v.replace(chr(10), chr(92) + 'n')}\n"
                                          for k, v in env.items())
        out[line["id"]] = text
    out["help"] = "--help"
    out["version"] = "--version"
    out["module_dry_run"] = "--dry_run --nproc_per_node=2 --tee 0:1,1:3 -m pkg.train --epochs 3"
    out["no_python"] = "--no-python --redirects 3 --local_ranks_filter 0,1 /bin/true"
    out["slurm_preset"] = ("--env_preset=slurm --nproc_per_node=4 /dev/null\n@env\nSLURM_NNODES=2\n"
                           "SLURM_NODEID=1\nSLURM_JOB_NODELIST=node[01-02]\nSLURM_JOB_ID=77\n")
    out["prefixes"] = ("--nproc 2 --nn 1:2 --rdzv-b c10d --rdzv-e h1:29400,h2:29400 "
                       "--rdzv_conf 'join_timeout=60, keep_alive_interval=1' /dev/null")
    return out


def cli_values():
    return {
        "rdzv_conf": "join_timeout=600,last_call_timeout=1,keep_alive_max_attempt=3,is_host=yes",
        "streams": "0:1,1:3",
        "stream_all": "3",
        "nnodes": "1:4",
        "ranks": "0,1,2",
        "signals": "SIGTERM,SIGUSR1",
        "filters": "loss,,acc,step",
        "seconds": "0.1",
        "port": "29500",
        "endpoints": "localhost:29400,[::1]:29401",
        "nproc": "auto",
        "template": "--rank=${local_rank} $$HOME",
    }


def hostlists():
    return {
        "docs": "node[01-04,07],gpu5,rack[1-2]-n[3-4]",
        "padded": "n[08-10]",
        "single": "gpu5",
        "product": "a[0-3]b[00-01]",
    }


def presets():
    return {
        "slurm": "slurm\n@env\nSLURM_NNODES=2\nSLURM_NODEID=0\nSLURM_JOB_NODELIST=node[01-02]\n"
                 "SLURM_JOB_ID=42\nMASTER_PORT=29500\n",
        "aiplatform": "aiplatform\n@env\nWORLD_SIZE=2\nRANK=1\nMASTER_ADDR=master-0\n"
                      "MASTER_PORT=23456\n",
        "azureml": "azureml\n@env\nWORLD_SIZE=3\nNODE_RANK=0\nMASTER_ADDR=10.0.0.4\n"
                   "MASTER_PORT=6105\n",
        "skypilot": "skypilot\n@env\nSKYPILOT_NODE_IPS=10.0.0.1\\n10.0.0.2\\n\n"
                    "SKYPILOT_NODE_RANK=1\nSKYPILOT_NUM_GPUS_PER_NODE=8\n",
    }


def write(target, entries):
    folder = ROOT / "corpus" / target
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in entries.items():
        data = content.encode() if isinstance(content, str) else content
        (folder / name).write_bytes(data)


def main():
    write("store_protocol", {**legacy_frames(), **validated_frames()})
    write("rdzv_state", rdzv_values())
    write("cli", cli_lines())
    write("cli_values", cli_values())
    write("slurm_hostlist", hostlists())
    write("env_presets", presets())


if __name__ == "__main__":
    main()
