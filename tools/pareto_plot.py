#!/usr/bin/env python3
"""Draws a quality-against-work chart (PNG) from the points.tsv of tools/step_methods_sweep.sh:
one dot per configuration at (share of the reference's DiT work, PSNR against the reference),
labelled, with the plain step-reduction points joined by a line. Pillow only (no matplotlib).

usage: tools/pareto_plot.py points.tsv out.png [title]
"""
import sys

from PIL import Image, ImageDraw


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    points = []
    for line in open(sys.argv[1]):
        name, work, psnr, ssim = line.rstrip("\n").split("\t")
        points.append((name, float(work), float(psnr)))
    if not points:
        sys.exit("no points")
    title = sys.argv[3] if len(sys.argv) > 3 else "PSNR against the dense run vs share of its work"
    w, h, left, right, top, bottom = 1000, 600, 70, 150, 40, 60
    img = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(img)
    lo = min(p[2] for p in points) - 1
    hi = max(p[2] for p in points) + 1

    def xy(work, psnr):
        x = left + work * (w - left - right)
        y = top + (hi - psnr) / (hi - lo) * (h - top - bottom)
        return x, y

    # axes and grid
    for k in range(0, 11):
        x, _ = xy(k / 10, lo)
        d.line([(x, top), (x, h - bottom)], fill=(230, 230, 230))
        d.text((x - 8, h - bottom + 6), f"{k / 10:.1f}", fill="black")
    step = max(1, round((hi - lo) / 8))
    v = int(lo)
    while v <= hi:
        _, y = xy(0, v)
        if top <= y <= h - bottom:
            d.line([(left, y), (w - right, y)], fill=(230, 230, 230))
            d.text((8, y - 6), f"{v} dB", fill="black")
        v += step
    d.rectangle([left, top, w - right, h - bottom], outline="black")
    d.text((left, 12), title, fill="black")
    d.text((w // 2 - 120, h - 24), "share of the dense run's DiT work", fill="black")
    # plain step reduction joined (UniPC and Euler separately)
    for prefix, colour in (("steps=", (120, 120, 120)), ("euler steps=", (180, 140, 60))):
        line = sorted((p for p in points if p[0].startswith(prefix)), key=lambda p: p[1])
        if len(line) > 1:
            d.line([xy(p[1], p[2]) for p in line], fill=colour, width=2)
    colours = {"magcache": (200, 40, 40), "easycache": (40, 120, 200), "hsa": (40, 160, 60),
               "svg": (150, 60, 180), "teacache": (230, 120, 0), "dvg": (0, 150, 150),
               "kaleido": (140, 90, 40), "steps": (80, 80, 80), "euler": (180, 140, 60)}
    for name, work, psnr in points:
        colour = next((c for k, c in colours.items() if k in name), (0, 0, 0))
        x, y = xy(work, psnr)
        d.ellipse([x - 5, y - 5, x + 5, y + 5], fill=colour)
        d.text((x + 8, y - 6), name, fill=colour)
    img.save(sys.argv[2])


if __name__ == "__main__":
    main()
