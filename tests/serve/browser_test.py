#!/usr/bin/env python3
"""The web page of `vidax serve` in a real browser: headless Chromium (Debian's chromium and
chromium-driver) driven through Selenium, from the form to a playing video, with a screenshot
checked. Uses the shipped vidax-tiny so the picture is a real generation. Skips (exit 77) where
Chromium is not installed. Run by CTest (label serve).

VIDAX_BROWSER_SCREENSHOT=FILE keeps the screenshot (docs/img/serve-page.png was made so)."""
import io
import os
import shutil
import sys
import tempfile
import time
import unittest

from serve_harness import Server

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    webdriver = None

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
TINY = os.environ.get("VIDAX_TINY_MODEL", "models/vidax-tiny")


def make_driver():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", "--autoplay-policy=no-user-gesture-required"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(DRIVER), options=options)


class BrowserTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="vidax_browser_")
        cls.server = Server(TINY, os.path.join(cls.tmp.name, "videos"), "--precision", "fp32",
                            "--negative-prompt", "",
                            defaults=("--size", "256x256", "--frames", "17", "--steps", "20"))
        cls.url = f"http://127.0.0.1:{cls.server.port}/"
        cls.driver = make_driver()

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        rc = cls.server.stop()
        cls.tmp.cleanup()
        assert rc == 0, "".join(cls.server.log)

    def test_form_to_playing_video(self):
        d = self.driver
        d.get(self.url)
        self.assertEqual(d.title, "vidax")
        self.assertEqual(d.execute_script(
            "return document.createElement('video').canPlayType('video/mp4; codecs=\"avc1.64001e\"')"),
            "probably", "this Chromium cannot play H.264")
        d.find_element(By.ID, "prompt").send_keys(
            "a red square moves to the left on a dark blue background")
        d.find_element(By.ID, "seed").send_keys("42")
        d.find_element(By.ID, "submit").click()
        # The job shows up in the list, its progress streams in, and it succeeds.
        wait = WebDriverWait(d, 300, poll_frequency=0.2)
        wait.until(lambda drv: drv.find_elements(By.CSS_SELECTOR, ".job"))
        wait.until(lambda drv: drv.find_elements(By.CSS_SELECTOR, ".job[data-status=succeeded]"))
        self.assertGreater(d.execute_script("return progress.size"), 0,
                           "no server-sent progress event reached the page")
        # The finished video plays in the page.
        video = d.find_element(By.ID, "player")
        wait.until(lambda drv: drv.execute_script(
            "const v = document.getElementById('player');"
            "return v.readyState >= 3 && v.currentTime > 0.2 && !v.paused"))
        self.assertEqual(d.execute_script("return document.getElementById('player').videoWidth"),
                         256)
        self.assertIsNone(d.execute_script("return document.getElementById('player').error"))
        job_id = d.execute_script(
            "return document.querySelector('.job[data-status=succeeded]').dataset.id")
        self.assertTrue(d.execute_script("return document.getElementById('player').src")
                        .endswith(f"/v1/videos/{job_id}/content"))
        # Screenshot: the page, and the video element showing a picture (not one flat colour).
        page_png = d.get_screenshot_as_png()
        keep = os.environ.get("VIDAX_BROWSER_SCREENSHOT")
        if keep:
            with open(keep, "wb") as f:
                f.write(page_png)
        from PIL import Image, ImageStat
        shot = Image.open(io.BytesIO(video.screenshot_as_png)).convert("RGB")
        self.assertGreaterEqual(shot.width, 200)
        spread = ImageStat.Stat(shot).stddev
        self.assertGreater(max(spread), 8.0, f"the video area looks blank (stddev {spread})")
        page = Image.open(io.BytesIO(page_png))
        self.assertEqual(page.size[0], 1280)

    def test_page_stays_responsive_with_many_jobs(self):
        # More active jobs than a browser opens connections to one server (six): the page keeps
        # one event stream and its requests still go through.
        s = self.server
        ids = [s.submit(prompt=f"busy {i}", steps=200) for i in range(8)]
        try:
            d = self.driver
            d.get(self.url)
            wait = WebDriverWait(d, 60, poll_frequency=0.2)
            wait.until(lambda drv: len(drv.find_elements(By.CSS_SELECTOR, ".job")) >= 8)
            d.find_element(By.ID, "prompt").send_keys("one more")
            d.find_element(By.ID, "submit").click()
            # (the list is redrawn at every progress event: read it in one script, not through
            # element references that go stale)
            wait.until(lambda drv: "one more" in drv.execute_script(
                "return [...document.querySelectorAll('.prompt')].map(e => e.textContent)"))
            # Cancel from the page: the running job's button.
            job_id = wait.until(lambda drv: drv.execute_script(
                "const b = document.querySelector('.job[data-status=running] button');"
                "if (!b) return null; b.click(); return b.closest('.job').dataset.id"))
            self.assertEqual(s.wait(job_id)["status"], "cancelled")
        finally:
            for job in s.json("GET", "/v1/videos")[1]["videos"]:
                if job["status"] in ("queued", "running"):
                    s.request("DELETE", "/v1/videos/" + job["id"])

    def test_form_reports_a_bad_field(self):
        d = self.driver
        d.get(self.url)
        d.find_element(By.ID, "prompt").send_keys("a ball")
        d.find_element(By.ID, "num_frames").send_keys("10")
        d.find_element(By.ID, "submit").click()
        WebDriverWait(d, 30).until(lambda drv: drv.find_element(By.ID, "error").text)
        self.assertIn("nearest valid: 9 or 13", d.find_element(By.ID, "error").text)
        self.assertIn("bad", d.find_element(By.ID, "num_frames").get_attribute("class"))


if __name__ == "__main__":
    if webdriver is None or CHROMIUM is None or DRIVER is None:
        print("skipped: needs python3-selenium, chromium and chromium-driver")
        sys.exit(77)
    unittest.main(verbosity=2)
