#!/usr/bin/env python3
"""`vidax serve` end to end: the real server on a loopback port, the real generation pipeline on
a tiny random model, real HTTP (docs/serve.md). Run by CTest (label serve)."""
import base64
import http.client
import json
import os
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import unittest
import zlib

from serve_harness import SLOW, VIDAX, Server, random_model

TERMINAL = ("succeeded", "failed", "cancelled")


def tiny_png(width=32, height=32):
    """A small RGB PNG (a gradient), made here with zlib."""
    rows = b"".join(b"\x00" + b"".join(bytes((x * 8 % 256, y * 8 % 256, 128)) for x in range(width))
                    for y in range(height))

    def chunk(kind, data):
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def decoded_frames(mp4):
    """The video's frames as raw RGB bytes (FFmpeg's decoder)."""
    return subprocess.run(["ffmpeg", "-v", "error", "-i", mp4, "-f", "rawvideo", "-pix_fmt",
                           "rgb24", "-"], check=True, capture_output=True).stdout


def raw_http(port, text):
    """Sends `text` as is (for what http.client will not send) and returns the status code."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(text.encode())
        reply = b""
        while b"\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    return int(reply.split(b" ", 2)[1])


def leftovers(folder):
    """Temporaries in the output folder (a partial file would be one)."""
    return [n for n in os.listdir(folder) if ".tmp." in n]


class ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="vidax_serve_test_")
        cls.model = random_model(os.path.join(cls.tmp.name, "model"))
        cls.out = os.path.join(cls.tmp.name, "videos")
        cls.server = Server(cls.model, cls.out, "--max-queue", "3", "--max-body-mib", "1")

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.stop()
        cls.tmp.cleanup()
        assert rc == 0, "".join(cls.server.log)

    def tearDown(self):
        # Nothing of one test may still run in the next.
        for job in self.server.json("GET", "/v1/videos")[1]["videos"]:
            if job["status"] not in TERMINAL:
                self.server.request("DELETE", "/v1/videos/" + job["id"])
                self.server.wait(job["id"])

    def test_submit_poll_download(self):
        s = self.server
        status, headers, body = s.request("POST", "/v1/videos", {"prompt": "a red square", "seed": 7})
        self.assertEqual(status, 202, body)
        job = json.loads(body)
        self.assertEqual(headers["location"], "/v1/videos/" + job["id"])
        self.assertEqual(job["status"], "queued")
        # The server's defaults and the model's fill the request.
        self.assertEqual(job["request"]["size"], "64x64")
        self.assertEqual(job["request"]["num_frames"], 5)
        self.assertEqual(job["request"]["steps"], 3)
        self.assertEqual(job["request"]["seed"], 7)
        done = s.wait(job["id"])
        self.assertEqual(done["status"], "succeeded", done)
        self.assertEqual(done["content"], f"/v1/videos/{job['id']}/content")
        self.assertEqual(done["sidecar"]["seed"], 7)
        self.assertEqual(done["sidecar"]["frames"], 5)
        self.assertEqual(done["sidecar"]["prompt"], "a red square")
        self.assertGreater(done["timings"]["seconds_per_step"], 0)
        status, headers, video = s.request("GET", done["content"])
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], "video/mp4")
        self.assertEqual(video[4:8], b"ftyp")
        self.assertEqual(len(video), os.path.getsize(os.path.join(self.out, job["id"] + ".mp4")))
        # Range requests, as a browser seeking makes them.
        status, headers, part = s.request("GET", done["content"], headers={"Range": "bytes=10-99"})
        self.assertEqual(status, 206)
        self.assertEqual(part, video[10:100])
        self.assertEqual(headers["content-range"], f"bytes 10-99/{len(video)}")
        status, _, part = s.request("GET", done["content"], headers={"Range": "bytes=-16"})
        self.assertEqual((status, part), (206, video[-16:]))
        status, headers, _ = s.request("GET", done["content"],
                                       headers={"Range": f"bytes={len(video) + 5}-"})
        self.assertEqual(status, 416)
        self.assertEqual(headers["content-range"], f"bytes */{len(video)}")
        # A range that runs past the end stops at the last byte.
        status, headers, part = s.request("GET", done["content"],
                                          headers={"Range": "bytes=100-99999999"})
        self.assertEqual((status, part), (206, video[100:]))
        self.assertEqual(headers["content-range"], f"bytes 100-{len(video) - 1}/{len(video)}")
        # Several ranges: the whole file.
        status, _, whole = s.request("GET", done["content"], headers={"Range": "bytes=0-9,20-29"})
        self.assertEqual((status, whole), (200, video))
        # A Range header on an error answer leaves the error intact.
        status, _, body = s.request("GET", "/v1/videos/0123456789abcdef/content",
                                    headers={"Range": "bytes=0-3"})
        self.assertEqual(status, 404)
        self.assertIn("no video job", json.loads(body)["error"]["message"])
        self.assertEqual(leftovers(self.out), [])

    def test_same_seed_same_video_as_generate(self):
        s = self.server
        job = s.wait(s.submit(prompt="a blue circle", seed=11))
        self.assertEqual(job["status"], "succeeded")
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([VIDAX, "--threads", "1", "generate", "--model", self.model, "--prompt",
                            "a blue circle", "--seed", "11", "--size", "64x64", "--frames", "5",
                            "--steps", "3", "--no-hash", "-o", d + "/cli.mp4"], check=True,
                           stderr=subprocess.DEVNULL)
            cli = decoded_frames(d + "/cli.mp4")
        served = decoded_frames(os.path.join(self.out, job["id"] + ".mp4"))
        self.assertEqual(len(served), 5 * 64 * 64 * 3)
        self.assertEqual(served, cli)
        # A model kept loaded gives the same video again.
        again = s.wait(s.submit(prompt="a blue circle", seed=11))
        self.assertEqual(decoded_frames(os.path.join(self.out, again["id"] + ".mp4")), cli)

    def test_events_stream(self):
        s = self.server
        job_id = s.submit(prompt="events", steps=4)
        events = s.events(job_id)
        statuses = [e["data"]["status"] for e in events if e["event"] == "status"]
        self.assertEqual(statuses, ["queued", "running", "succeeded"])
        seqs = [int(e["id"]) for e in events]
        self.assertEqual(seqs, sorted(set(seqs)))  # strictly increasing
        ticks = [e["data"] for e in events
                 if e["event"] == "progress" and e["data"]["phase"] == "denoise"
                 and e["data"]["event"] == "tick"]
        self.assertEqual([t["done"] for t in ticks], [1, 2, 3, 4])
        self.assertTrue(all(t["total"] == 4 for t in ticks))
        phases = [e["data"]["phase"] for e in events
                  if e["event"] == "progress" and e["data"]["event"] == "begin"]
        self.assertEqual(phases, ["encode text", "denoise", "decode"])
        # Resuming after an event id sends only what follows it; after the last: 204, which
        # tells an EventSource to stop reconnecting.
        later = s.events(job_id, headers={"Last-Event-ID": str(seqs[-2])})
        self.assertEqual([int(e["id"]) for e in later], [seqs[-1]])
        status, _, body = s.request("GET", f"/v1/videos/{job_id}/events",
                                    headers={"Last-Event-ID": str(seqs[-1])})
        self.assertEqual((status, body), (204, b""))

    def test_event_streams_are_capped(self):
        s = self.server
        job_id = s.submit(prompt="slow", **SLOW)
        s.wait_running_step(job_id)
        open_streams = []
        try:
            for _ in range(8):
                conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
                conn.request("GET", f"/v1/videos/{job_id}/events")
                res = conn.getresponse()
                self.assertEqual(res.status, 200)
                open_streams.append(conn)
            status, headers, body = s.request("GET", f"/v1/videos/{job_id}/events")
            self.assertEqual(status, 503, body)
            self.assertIn("retry-after", headers)
            self.assertEqual(s.request("GET", "/healthz")[0], 200)  # the API still answers
        finally:
            for conn in open_streams:
                conn.close()
        s.request("DELETE", "/v1/videos/" + job_id)
        s.wait(job_id)
        # The server notices the closed streams when it next writes to them (the job's end).
        deadline = time.time() + 20
        while s.request("GET", f"/v1/videos/{job_id}/events")[0] != 200:
            self.assertLess(time.time(), deadline, "the closed streams were never released")
            time.sleep(0.1)

    def test_cancel_running_job(self):
        s = self.server
        job_id = s.submit(prompt="slow", **SLOW)
        s.wait_running_step(job_id)
        status, body = s.json("DELETE", "/v1/videos/" + job_id)
        self.assertEqual(status, 202, body)
        t0 = time.time()
        job = s.wait(job_id, timeout=30)
        self.assertEqual(job["status"], "cancelled")
        self.assertEqual(job["error"], "cancelled while running")
        self.assertLess(job["progress"]["done"], SLOW["steps"])
        self.assertLess(time.time() - t0, 20, "the loop did not stop at the next step")
        self.assertFalse(os.path.exists(os.path.join(self.out, job_id + ".mp4")))
        self.assertEqual(leftovers(self.out), [])
        status, body = s.json("DELETE", "/v1/videos/" + job_id)
        self.assertEqual(status, 409)
        self.assertIn("already cancelled", body["error"]["message"])
        status, _ = s.json("GET", f"/v1/videos/{job_id}/content")
        self.assertEqual(status, 409)
        # The server goes on: the next job runs.
        self.assertEqual(s.wait(s.submit(prompt="after a cancel"))["status"], "succeeded")

    def test_cancel_queued_job_and_queue_overflow(self):
        s = self.server
        running = s.submit(prompt="slow", **SLOW)
        s.wait_running_step(running)
        queued = [s.submit(prompt=f"waiting {i}") for i in range(3)]  # --max-queue 3
        status, headers, body = s.request("POST", "/v1/videos", {"prompt": "one too many"})
        self.assertEqual(status, 429, body)
        self.assertIn("queue is full", json.loads(body)["error"]["message"])
        self.assertIn("retry-after", headers)
        status, body = s.json("DELETE", "/v1/videos/" + queued[1])
        self.assertEqual(status, 202)
        self.assertEqual(body["status"], "cancelled")
        self.assertEqual(s.job(queued[1])["error"], "cancelled while queued")
        # A slot is free again.
        extra = s.submit(prompt="fits now")
        s.request("DELETE", "/v1/videos/" + running)
        self.assertEqual(s.wait(running)["status"], "cancelled")
        for job_id in (queued[0], queued[2], extra):
            self.assertEqual(s.wait(job_id)["status"], "succeeded")
        self.assertEqual(s.job(queued[1])["status"], "cancelled")

    def test_bad_requests(self):
        s = self.server
        cases = [
            (b'{"prompt": "x",', 400, None, "not valid JSON"),
            (b'[1, 2]', 400, None, "JSON object"),
            (b'{"prompt": "x", "colour": "red"}', 400, "colour", "unknown field 'colour'"),
            (b'{"negative_prompt": "x"}', 400, "prompt", "required"),
            (b'{"prompt": "   "}', 400, "prompt", "empty"),
            (b'{"prompt": "x", "num_frames": 10}', 400, "num_frames", "nearest valid: 9 or 13"),
            (b'{"prompt": "x", "size": "65x64"}', 400, "size", "multiples of 16"),
            (b'{"prompt": "x", "size": "big"}', 400, "size", "WIDTHxHEIGHT"),
            (b'{"prompt": "x", "steps": 0}', 400, "steps", "1..1000"),
            (b'{"prompt": "x", "steps": "ten"}', 400, "steps", "integer"),
            (b'{"prompt": "x", "seed": -1}', 400, "seed", None),
            (b'{"prompt": "x", "sampler": "ddim"}', 400, "sampler", "unipc"),
            (b'{"prompt": "x", "guide_scale": -2}', 400, "guide_scale", ">= 0"),
            (b'{"prompt": "x", "accel": "warp"}', 400, "accel", "unknown method"),
            (b'{"prompt": "x", "attention": "sparse9"}', 400, "attention", "unknown policy"),
            (b'{"prompt": "x", "image": "!!!"}', 400, "image", "base64"),
            (b'{"prompt": "x", "image": "aGVsbG8="}', 400, "image", "PNG, JPEG or WebP"),
            (b'{"prompt": "x", "num_frames": 100001}', 400, "num_frames", None),
        ]
        for raw, want_status, want_field, want_text in cases:
            with self.subTest(body=raw):
                status, body = s.json("POST", "/v1/videos", raw=raw)
                self.assertEqual(status, want_status, body)
                self.assertEqual(body["error"].get("field"), want_field, body)
                if want_text:
                    self.assertIn(want_text, body["error"]["message"])
        # A body over --max-body-mib 1.
        status, _, body = s.request("POST", "/v1/videos",
                                    raw=b'{"prompt": "' + b"x" * (2 << 20) + b'"}')
        self.assertEqual(status, 413, body)
        self.assertIn("larger than the server accepts", json.loads(body)["error"]["message"])
        # Unknown and malformed ids, and paths that try to leave the output folder.
        for path in ("/v1/videos/0123456789abcdef", "/v1/videos/0123456789ABCDEF",
                     "/v1/videos/..%2F..%2Fetc%2Fpasswd", "/v1/videos/../../etc/passwd",
                     "/v1/videos/0123456789abcdef/content", "/v1/videos/x.job.json/content",
                     "/v1/videos/0123456789abcdef/events", "/nowhere"):
            with self.subTest(path=path):
                status, _, body = s.request("GET", path)
                self.assertEqual(status, 404, body)
                self.assertIn("message", json.loads(body)["error"])
        status, _ = s.json("DELETE", "/v1/videos/0123456789abcdef")
        self.assertEqual(status, 404)
        # Only JSON: a form or text POST (what another site's page can send) is refused.
        status, _, body = s.request("POST", "/v1/videos", raw=b'{"prompt": "x"}',
                                    headers={"Content-Type": "text/plain"})
        self.assertEqual(status, 415, body)
        # Bodies without a declared length are refused before they are read.
        chunked = ("POST /v1/videos HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                   "\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n0\r\n\r\n")
        self.assertEqual(raw_http(s.port, chunked), 411)
        unsized = ("POST /v1/videos HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Content-Type: application/json\r\nConnection: close\r\n\r\n{}")
        self.assertEqual(raw_http(s.port, unsized), 411)
        # A loopback server answers only to loopback names (no DNS rebinding).
        status, _, _ = s.request("GET", "/v1/videos", headers={"Host": "evil.example:8080"})
        self.assertEqual(status, 403)
        self.assertEqual(s.request("GET", "/healthz", headers={"Host": "localhost"})[0], 200)
        # Nothing refused left a file behind.
        self.assertEqual([n for n in os.listdir(self.out) if ".image." in n], [])

    def test_two_clients_at_once(self):
        s = self.server
        results, errors = {}, []

        def submit_politely(**fields):  # a client waits and retries when the queue is full
            for _ in range(600):
                status, headers, body = s.request("POST", "/v1/videos", fields)
                if status != 429:
                    self.assertEqual(status, 202, body)
                    return json.loads(body)["id"]
                time.sleep(0.05)
            raise AssertionError("the queue stayed full")

        def client(name):
            try:
                ids = [submit_politely(prompt=f"{name} {i}", seed=i) for i in range(3)]
                results[name] = [s.wait(i) for i in ids]
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)
        threads = [threading.Thread(target=client, args=(n,)) for n in ("alice", "bob")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        ids = [j["id"] for js in results.values() for j in js]
        self.assertEqual(len(set(ids)), 6)
        for name, jobs in results.items():
            for i, j in enumerate(jobs):
                self.assertEqual(j["status"], "succeeded")
                self.assertEqual(j["request"]["prompt"], f"{name} {i}")
                self.assertEqual(j["sidecar"]["prompt"], f"{name} {i}")

    def test_image_for_a_text_model_is_refused(self):
        # A text-to-video model refuses an image, naming the field, and keeps nothing.
        png = base64.b64encode(tiny_png()).decode()
        status, body = self.server.json("POST", "/v1/videos", {"prompt": "x", "image": png})
        self.assertEqual(status, 400, body)
        self.assertEqual(body["error"]["field"], "image")
        self.assertEqual([n for n in os.listdir(self.out) if ".image." in n], [])

    def test_health_metrics_page(self):
        s = self.server
        self.assertEqual(s.json("GET", "/healthz"), (200, {"status": "ok"}))
        s.wait(s.submit(prompt="counted"))
        status, headers, text = s.request("GET", "/metrics")
        self.assertEqual(status, 200)
        metrics = {}
        for line in text.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                metrics[name] = float(value)
        self.assertGreaterEqual(metrics['vidax_jobs_total{status="succeeded"}'], 1)
        self.assertEqual(metrics["vidax_queue_length"], 0)
        self.assertGreaterEqual(metrics["vidax_denoise_steps_total"], 3)
        self.assertGreater(metrics["vidax_denoise_step_seconds_total"], 0)
        status, headers, page = s.request("GET", "/")
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/html"))
        self.assertIn(b"<form id=\"form\">", page)


class ImageToVideoTest(unittest.TestCase):
    def test_image_to_video_job(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = random_model(os.path.join(tmp, "i2v"), "i2v")
            server = Server(model, os.path.join(tmp, "videos"))
            try:
                png = "data:image/png;base64," + base64.b64encode(tiny_png(48, 32)).decode()
                job = server.wait(server.submit(prompt="the picture moves", image=png, seed=3))
                self.assertEqual(job["status"], "succeeded", job)
                self.assertEqual(job["request"]["image"], job["id"] + ".image.png")
                self.assertEqual(job["sidecar"]["task"], "i2v")
                with open(os.path.join(tmp, "videos", job["request"]["image"]), "rb") as f:
                    self.assertEqual(f.read(), tiny_png(48, 32))
            finally:
                self.assertEqual(server.stop(), 0)


class RestartTest(unittest.TestCase):
    def test_restart_keeps_finished_and_queued_jobs(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = random_model(os.path.join(tmp, "model"))
            out = os.path.join(tmp, "videos")
            first = Server(model, out)
            done = first.wait(first.submit(prompt="finished before the restart"))
            slow = first.submit(prompt="interrupted", **SLOW)
            first.wait_running_step(slow)
            waiting = first.submit(prompt="queued at the restart")
            self.assertEqual(first.stop(signal.SIGTERM), 0)  # graceful
            self.assertEqual(leftovers(out), [])
            second = Server(model, out)
            try:
                again = second.job(done["id"])
                self.assertEqual(again["status"], "succeeded")
                status, _, video = second.request("GET", again["content"])
                self.assertEqual(status, 200)
                self.assertEqual(video[4:8], b"ftyp")
                # The interrupted job was queued again, ahead of the one that waited.
                self.assertIn(second.job(slow)["status"], ("queued", "running"))
                second.request("DELETE", "/v1/videos/" + slow)
                self.assertEqual(second.wait(slow)["status"], "cancelled")
                self.assertEqual(second.wait(waiting)["status"], "succeeded")
                ids = [j["id"] for j in second.json("GET", "/v1/videos")[1]["videos"]]
                self.assertEqual(sorted(ids), sorted([done["id"], slow, waiting]))
            finally:
                self.assertEqual(second.stop(), 0)

    def test_cancel_before_a_shutdown_stays_cancelled(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = random_model(os.path.join(tmp, "model"))
            out = os.path.join(tmp, "videos")
            first = Server(model, out)
            job_id = first.submit(prompt="cancelled", **SLOW)
            first.wait_running_step(job_id)
            self.assertEqual(first.request("DELETE", "/v1/videos/" + job_id)[0], 202)
            self.assertEqual(first.stop(signal.SIGTERM), 0)
            second = Server(model, out)
            try:
                self.assertEqual(second.job(job_id)["status"], "cancelled")
            finally:
                self.assertEqual(second.stop(), 0)

    def test_one_server_per_output_folder(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = random_model(os.path.join(tmp, "model"))
            out = os.path.join(tmp, "videos")
            first = Server(model, out)
            try:
                job_id = first.submit(prompt="slow", **SLOW)
                first.wait_running_step(job_id)
                r = subprocess.run([VIDAX, "serve", "--model", model, "--port", "0",
                                    "--output-dir", out], capture_output=True, text=True,
                                   timeout=60)
                self.assertNotEqual(r.returncode, 0)
                self.assertIn("another vidax serve is using this folder", r.stderr)
                self.assertEqual(first.job(job_id)["status"], "running")  # untouched
                self.assertEqual(len(leftovers(out)), 1)  # its video's temporary: kept
            finally:
                self.assertEqual(first.stop(), 0)

    def test_killed_server_leaves_no_partial_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = random_model(os.path.join(tmp, "model"))
            out = os.path.join(tmp, "videos")
            first = Server(model, out)
            # Killed while decoding (the video's temporary exists then) or denoising.
            job_id = first.submit(prompt="killed", size="256x256", num_frames=33, steps=30)
            deadline = time.time() + 60
            while time.time() < deadline and first.job(job_id)["progress"]["phase"] != "decode":
                time.sleep(0.01)
            self.assertEqual(first.job(job_id)["progress"]["phase"], "decode")
            temporaries = leftovers(out)  # the video being written
            first.stop(signal.SIGKILL)
            second = Server(model, out)
            try:
                job = second.job(job_id)
                self.assertEqual(job["status"], "failed")
                self.assertIn("server stopped while this job was running", job["error"])
                self.assertEqual(leftovers(out), [])  # removed by the restart
                self.assertEqual(len(temporaries), 1, temporaries)
                self.assertFalse(os.path.exists(os.path.join(out, job_id + ".mp4")))
                status, _ = second.json("GET", f"/v1/videos/{job_id}/content")
                self.assertEqual(status, 409)
            finally:
                self.assertEqual(second.stop(), 0)


class TokenTest(unittest.TestCase):
    def test_bearer_token(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = random_model(os.path.join(tmp, "model"))
            token_file = os.path.join(tmp, "token")
            with open(token_file, "w") as f:
                f.write("s3cret-token-0123456789\n")
            server = Server(model, os.path.join(tmp, "videos"), "--token-file", token_file)
            try:
                status, headers, _ = server.request("GET", "/v1/videos")
                self.assertEqual(status, 401)
                self.assertEqual(headers["www-authenticate"], "Bearer")
                status, _, _ = server.request("GET", "/v1/videos",
                                              headers={"Authorization": "Bearer wrong"})
                self.assertEqual(status, 401)
                good = {"Authorization": "Bearer s3cret-token-0123456789"}
                status, _, _ = server.request("POST", "/v1/videos", {"prompt": "x"}, headers=good)
                self.assertEqual(status, 202)
                cookie = {"Cookie": "theme=dark; vidax_token=s3cret-token-0123456789"}
                self.assertEqual(server.request("GET", "/v1/videos", headers=cookie)[0], 200)
                self.assertEqual(server.request("GET", "/healthz")[0], 200)
                self.assertEqual(server.request("GET", "/")[0], 200)
            finally:
                self.assertEqual(server.stop(), 0)

    def test_refuses_bad_settings(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = random_model(os.path.join(tmp, "model"))
            short = os.path.join(tmp, "short")
            with open(short, "w") as f:
                f.write("abc\n")
            for args, message in [
                (["--host", "0.0.0.0"], "--token-file"),
                (["--token-file", short], "at least 16 characters"),
                (["--token-file", os.path.join(tmp, "missing")], "cannot read"),
                (["--max-queue", "0"], "--max-queue"),
                (["--port", "70000"], "--port"),
            ]:
                with self.subTest(args=args):
                    r = subprocess.run([VIDAX, "serve", "--model", model, "--output-dir",
                                        os.path.join(tmp, "v"), *args],
                                       capture_output=True, text=True, timeout=60)
                    self.assertNotEqual(r.returncode, 0)
                    self.assertIn(message, r.stderr)
                    self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
