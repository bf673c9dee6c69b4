#!/usr/bin/env python3
"""A bounded load test of `vidax serve` on loopback: 50 queued requests with cancellations
interleaved (while queued and while running). Nothing is lost, every job ends in exactly one
state, and the server's memory comes back to its idle level. Run by CTest (label serve)."""
import os
import tempfile
import time
import unittest

from serve_harness import Server, random_model

JOBS = 50
# Allowed growth of the resident set over the whole load: the records of 50 more jobs (about
# 2 KiB each) and the allocator's noise. Anything a run leaked would be MiBs per job (a 128x128
# job's latents and activations are several MiB). Measured: +3 to +4 MiB.
RSS_SLACK = 8 << 20


class LoadTest(unittest.TestCase):
    def test_fifty_jobs_with_cancellations(self):
        with tempfile.TemporaryDirectory(prefix="vidax_load_") as tmp:
            model = random_model(os.path.join(tmp, "model"))
            out = os.path.join(tmp, "videos")
            s = Server(model, out, "--max-queue", "64")
            try:
                # Warm up: the models load with the first job; a few more settle the allocator.
                for i in range(3):
                    self.assertEqual(s.wait(s.submit(prompt=f"warm {i}", size="128x128",
                                                     steps=8))["status"], "succeeded")
                time.sleep(0.5)
                idle = s.rss_bytes()

                ids, cancel_now, cancel_running = [], set(), set()
                for i in range(JOBS):
                    job_id = s.submit(prompt=f"load {i}", seed=i, size="128x128", steps=8)
                    ids.append(job_id)
                    if i % 5 == 1:  # cancelled at once (queued, or just started)
                        self.assertEqual(s.request("DELETE", "/v1/videos/" + job_id)[0], 202)
                        cancel_now.add(job_id)
                for i, job_id in enumerate(ids):
                    if i % 7 == 3 and job_id not in cancel_now:  # cancelled while it runs
                        deadline = time.time() + 60
                        while s.job(job_id)["status"] == "queued" and time.time() < deadline:
                            time.sleep(0.005)
                        s.request("DELETE", "/v1/videos/" + job_id)
                        cancel_running.add(job_id)
                final = {job_id: s.wait(job_id, timeout=600) for job_id in ids}

                states = [j["status"] for j in final.values()]
                self.assertEqual(states.count("failed"), 0,
                                 [j["error"] for j in final.values() if j["error"]])
                for job_id, j in final.items():
                    if job_id in cancel_now:
                        self.assertEqual(j["status"], "cancelled", j)
                    elif job_id not in cancel_running:
                        self.assertEqual(j["status"], "succeeded", j)
                    else:  # it may have finished before the DELETE reached it
                        self.assertIn(j["status"], ("succeeded", "cancelled"))
                    # Exactly one terminal event, the last of the stream.
                    events = s.events(job_id)
                    ends = [e for e in events if e["event"] == "status"
                            and e["data"]["status"] in ("succeeded", "failed", "cancelled")]
                    self.assertEqual(len(ends), 1, events)
                    self.assertIs(ends[0], events[-1])
                    self.assertEqual(ends[0]["data"]["status"], j["status"])
                    video = os.path.join(out, job_id + ".mp4")
                    self.assertEqual(os.path.exists(video), j["status"] == "succeeded")
                self.assertEqual([n for n in os.listdir(out) if ".tmp." in n], [])

                metrics = {}
                for line in s.request("GET", "/metrics")[2].decode().splitlines():
                    if line and not line.startswith("#"):
                        name, value = line.rsplit(" ", 1)
                        metrics[name] = float(value)
                self.assertEqual(metrics['vidax_jobs_total{status="succeeded"}'],
                                 states.count("succeeded") + 3)
                self.assertEqual(metrics['vidax_jobs_total{status="cancelled"}'],
                                 states.count("cancelled"))
                self.assertEqual(metrics["vidax_queue_length"], 0)
                self.assertEqual(metrics["vidax_jobs_running"], 0)

                time.sleep(0.5)
                after = s.rss_bytes()
                print(f"load: {states.count('succeeded')} succeeded, "
                      f"{states.count('cancelled')} cancelled; RSS idle {idle / 2**20:.1f} MiB, "
                      f"after {after / 2**20:.1f} MiB")
                self.assertLessEqual(after, idle + RSS_SLACK)
            finally:
                self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
