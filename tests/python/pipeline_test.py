#!/usr/bin/env python3
"""The Python module (`import vidax`, python/vidax_module.cpp) with the shipped vidax-tiny:
array shape and dtype, the same frames as `vidax generate` for the same seed, progress
callbacks, errors as Python exceptions, the GIL released while it runs. Run by CTest (label
python) with PYTHONPATH at the build's python/ folder."""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np
from PIL import Image

import vidax

VIDAX = os.environ.get("VIDAX_BIN", "build/ci/vidax")
TINY = os.environ.get("VIDAX_TINY_MODEL", "models/vidax-tiny")
PROMPT = "a red square moves to the left on a dark blue background"
ARGS = dict(prompt=PROMPT, negative_prompt="", num_frames=5, height=64, width=96,
            num_inference_steps=3, guidance_scale=5.0, generator_seed=42)


class PipelineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pipe = vidax.Pipeline.from_pretrained(TINY, precision="fp32")

    def test_frames_equal_the_cli(self):
        out = self.pipe(**ARGS)
        frames, sidecar = out  # a namedtuple: out.frames, out.sidecar
        self.assertIs(frames, out.frames)
        self.assertEqual(frames.shape, (5, 64, 96, 3))
        self.assertEqual(frames.dtype, np.uint8)
        self.assertEqual(sidecar["seed"], 42)
        self.assertEqual(sidecar["size"], [96, 64])
        self.assertEqual(sidecar["steps"], 3)
        self.assertEqual(sidecar["prompt"], PROMPT)
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([VIDAX, "generate", "--model", TINY, "--precision", "fp32",
                            "--prompt", PROMPT, "--negative-prompt", "", "--frames", "5",
                            "--size", "96x64", "--steps", "3", "--guide-scale", "5",
                            "--seed", "42", "--no-hash", "-o", d + "/"],
                           check=True, stderr=subprocess.DEVNULL)
            names = sorted(n for n in os.listdir(d) if n.endswith(".png"))
            cli = np.stack([np.asarray(Image.open(os.path.join(d, n)).convert("RGB"))
                            for n in names])
        self.assertEqual(cli.shape, frames.shape)
        np.testing.assert_array_equal(frames, cli)
        self.assertGreater(frames.std(), 1.0)  # a picture, not a constant

    def test_models_stay_loaded(self):
        self.pipe(**ARGS)
        loads = self.pipe.models_loaded
        self.assertEqual(loads, 4)  # the tokenizer, umT5, the DiT, the VAE decoder
        again = self.pipe(**ARGS)
        self.assertEqual(self.pipe.models_loaded, loads)
        np.testing.assert_array_equal(again.frames, self.pipe(**ARGS).frames)

    def test_progress_callback(self):
        events = []
        self.pipe(**ARGS, callback=events.append)
        ticks = [e["done"] for e in events if e["phase"] == "denoise" and e["event"] == "tick"]
        self.assertEqual(ticks, [1, 2, 3])
        self.assertEqual([e["phase"] for e in events if e["event"] == "begin"],
                         ["encode text", "denoise", "decode"])

    def test_callback_exception_stops_the_run(self):
        seen = []

        def stop_after_one_step(e):
            seen.append(e)
            if e["phase"] == "denoise" and e["event"] == "tick":
                raise RuntimeError("enough")
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(RuntimeError, "enough"):
                self.pipe(**{**ARGS, "num_inference_steps": 20}, output=d + "/x.mp4",
                          callback=stop_after_one_step)
            self.assertEqual(os.listdir(d), [])  # no video, no temporary
        ticks = [e for e in seen if e["phase"] == "denoise" and e["event"] == "tick"]
        self.assertEqual(len(ticks), 1)

    def test_writes_a_video_with_its_sidecar(self):
        with tempfile.TemporaryDirectory() as d:
            out = self.pipe(**ARGS, output=d + "/clip.mp4")
            self.assertEqual(sorted(os.listdir(d)), ["clip.mp4", "clip.mp4.json"])
            self.assertEqual(out.frames.shape[0], 5)

    def test_errors_are_python_exceptions(self):
        with self.assertRaises(vidax.InputError) as e:
            self.pipe(**{**ARGS, "num_frames": 10})
        self.assertIsInstance(e.exception, ValueError)
        self.assertIn("4k+1", str(e.exception))
        self.assertIn("nearest valid: 9 or 13", str(e.exception))
        with self.assertRaisesRegex(ValueError, "prompt"):
            self.pipe(**{**ARGS, "prompt": " "})
        with self.assertRaisesRegex(ValueError, "sampler"):
            self.pipe(**ARGS, sampler="ddim")
        with self.assertRaisesRegex(ValueError, "accel"):
            self.pipe(**ARGS, accel="warp")
        with self.assertRaisesRegex(vidax.InputError, "nowhere"):
            vidax.Pipeline.from_pretrained("/nowhere/model")
        with self.assertRaisesRegex(vidax.InputError, "precision"):
            vidax.Pipeline.from_pretrained(TINY, precision="fp64")
        with self.assertRaisesRegex(vidax.InputError, "threads"):
            vidax.Pipeline.from_pretrained(TINY, threads=-1)
        with self.assertRaises(TypeError):
            self.pipe(PROMPT)  # keyword arguments only, as diffusers' pipelines

    def test_gil_is_released_while_it_runs(self):
        counter = [0]
        stop = threading.Event()

        def count():
            while not stop.is_set():
                counter[0] += 1
                time.sleep(0.001)
        t = threading.Thread(target=count)
        t.start()
        time.sleep(0.05)
        start = counter[0]
        t0 = time.time()
        self.pipe(**{**ARGS, "height": 256, "width": 256, "num_frames": 17,
                     "num_inference_steps": 6})
        elapsed = time.time() - t0
        during = counter[0] - start
        stop.set()
        t.join()
        # The counter thread ticks about every millisecond; with the GIL held for the call it
        # could not have run at all until the call returned.
        self.assertGreater(elapsed, 0.1)
        self.assertGreater(during, 100 * elapsed, (during, elapsed))

    def test_two_threads_share_a_pipeline(self):
        expected = {seed: self.pipe(**{**ARGS, "generator_seed": seed}).frames for seed in (1, 2)}
        got, errors = {}, []

        def run(seed):
            try:
                got[seed] = self.pipe(**{**ARGS, "generator_seed": seed}).frames
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)
        threads = [threading.Thread(target=run, args=(seed,)) for seed in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        self.assertFalse(any(t.is_alive() for t in threads), "deadlock")
        self.assertEqual(errors, [])
        for seed in (1, 2):
            np.testing.assert_array_equal(got[seed], expected[seed])

    def test_ctrl_c_stops_the_run(self):
        script = f"""
import sys, vidax
pipe = vidax.Pipeline.from_pretrained({TINY!r}, precision="fp32")
def ready(e):
    if e["phase"] == "denoise" and e["done"] == 1:
        print("denoising", flush=True)
try:
    pipe(prompt="x", num_frames=17, height=256, width=256, num_inference_steps=1000,
         generator_seed=1, output=sys.argv[1], callback=ready)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
"""
        with tempfile.TemporaryDirectory() as d:
            proc = subprocess.Popen([sys.executable, "-c", script, d + "/clip.mp4"],
                                    stdout=subprocess.PIPE, text=True,
                                    env={**os.environ, "OMP_NUM_THREADS": "1"})
            self.assertEqual(proc.stdout.readline().strip(), "denoising")
            t0 = time.time()
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=60)
            self.assertEqual(proc.returncode, 3)
            self.assertEqual(out.strip(), "interrupted")
            self.assertLess(time.time() - t0, 30)
            self.assertEqual(os.listdir(d), [])  # no video, no temporary


if __name__ == "__main__":
    unittest.main(verbosity=2)
