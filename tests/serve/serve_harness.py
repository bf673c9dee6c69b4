"""Starts the real `vidax serve` on a loopback port and talks HTTP to it (standard library only).

Used by the server, load and browser tests (tests/serve/*_test.py). Environment:
  VIDAX_BIN      the vidax binary
  VIDAX_SPIECE   a sentencepiece model for `vidax random-model`
"""
import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time

VIDAX = os.environ.get("VIDAX_BIN", "build/ci/vidax")
SPIECE = os.environ.get("VIDAX_SPIECE", "tests/data/tokenizer/spiece.model")

# A job that runs for many seconds on the tiny random model (the cancel and queue tests).
SLOW = {"size": "256x256", "num_frames": 33, "steps": 1000}


def random_model(folder, kind="t2v"):
    """A tiny random Wan model folder (official layout)."""
    if not os.path.isdir(folder):
        subprocess.run([VIDAX, "random-model", folder, "--tokenizer", SPIECE, "--model", kind],
                       check=True, stdout=subprocess.DEVNULL)
    return folder


class Server:
    """One `vidax serve` process. Its stderr is kept in `self.log`."""

    def __init__(self, model, output_dir, *extra, defaults=("--size", "64x64", "--frames", "5",
                                                              "--steps", "3"), threads=1):
        self.output_dir = output_dir
        cmd = [VIDAX, *(["--threads", str(threads)] if threads else []), "serve", "--model", model, "--port", "0", "--output-dir",
               output_dir, "--no-hash", *defaults, *extra]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     text=True)
        self.log = []
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.wait(timeout=30)
            raise RuntimeError("vidax serve did not start: " + "".join(self.log))
        self._drain = threading.Thread(target=self._read_log, daemon=True)
        self._drain.start()

    def _read_log(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def request(self, method, path, body=None, headers=None, raw=None, timeout=60):
        """(status, headers dict (lowercase names), body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        hdrs = dict(headers or {})
        if data is not None:
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=hdrs)
        res = conn.getresponse()
        payload = res.read()
        conn.close()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, payload

    def json(self, method, path, body=None, headers=None, raw=None):
        status, _, payload = self.request(method, path, body, headers, raw)
        return status, json.loads(payload) if payload else None

    def submit(self, **fields):
        status, body = self.json("POST", "/v1/videos", fields)
        if status != 202:
            raise AssertionError(f"POST /v1/videos {fields}: HTTP {status} {body}")
        return body["id"]

    def job(self, job_id):
        status, body = self.json("GET", "/v1/videos/" + job_id)
        assert status == 200, (status, body)
        return body

    def wait(self, job_id, states=("succeeded", "failed", "cancelled"), timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            j = self.job(job_id)
            if j["status"] in states:
                return j
            time.sleep(0.05)
        raise AssertionError(f"job {job_id} still {self.job(job_id)['status']} after {timeout} s")

    def wait_running_step(self, job_id, timeout=60):
        """Waits until the job is running its denoising loop."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            j = self.job(job_id)
            if j["status"] == "running" and j["progress"]["phase"].startswith("denoise") and \
                    j["progress"]["done"] >= 1:
                return j
            time.sleep(0.05)
        raise AssertionError(f"job {job_id} never reached a denoising step")

    def events(self, job_id, headers=None, timeout=120):
        """Every server-sent event of the job's stream until the server ends it."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.request("GET", f"/v1/videos/{job_id}/events", headers=headers or {})
        res = conn.getresponse()
        assert res.status == 200, res.status
        assert res.getheader("Content-Type").startswith("text/event-stream")
        events, current = [], {}
        for raw in res:
            line = raw.decode().rstrip("\n")
            if line == "":
                if current:
                    events.append(current)
                current = {}
            elif line.startswith(":"):
                continue
            else:
                key, _, value = line.partition(": ")
                current[key] = json.loads(value) if key == "data" else value
        conn.close()
        return events

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Stops the server; returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=timeout)
        self._drain.join(timeout=5)
        self.proc.stderr.close()
        return rc
