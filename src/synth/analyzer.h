// Prompt-adherence analyzer: reads frames (generated or rendered) and estimates what a caption
// would say about them -- the background colour, and per object its colour, shape and motion --
// then scores that against the attributes a prompt asked for. `vidax eval` uses it to judge
// generations; validating it on ground-truth renders tells how far its verdicts can be trusted.
//
// Method (docs/synthetic-world.md has the details and the measured accuracy):
//  - background: per frame, the per-channel median of a 2-pixel border ring; named by the
//    nearest background colour (median over frames);
//  - foreground: a pixel p is explained as a blend bg + alpha * (c - bg) of the background and
//    each named object colour c; it belongs to the colour with the smallest residual among those
//    with alpha >= 1/2 (so anti-aliased and blurred edges keep their colour and the mask is the
//    shape's half-coverage contour);
//  - objects: colours holding >= 15% of the largest colour's pixels, merged when their pixels
//    sit on one spot (colour drift inside one object); at most two, largest first;
//  - shape: per frame the largest 4-connected component; median over frames of its fill ratio
//    of the bounding box: square ~1, circle ~pi/4, upright triangle ~1/2;
//  - motion: centroid and area trajectories: a vertical excursion beyond both end points is a
//    bounce, an area ratio >= 1.4 (or <= 1/1.4) grow/shrink, a centroid shift >= 8% of the frame
//    left/right/up/down, otherwise still.
//
// Pure functions; safe to call from any number of threads.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "synth/synth_world.h"

namespace vidax::synth {

struct DetectedObject {
  ObjectAttributes attributes;
  int64_t pixels = 0;     // labelled pixels over the clip
  int frames_seen = 0;    // frames where it covers >= 16 pixels
  double fill = 0;        // median fill ratio of the bounding box
  double dx = 0, dy = 0;  // centroid shift, fraction of width / height (end - start)
  double area_ratio = 1;  // area at the end / at the start
  double excursion = 0;   // vertical excursion beyond both end points, fraction of height
};

struct Analysis {
  int background = 0;                   // nearest named background
  float background_rgb[3]{};            // the measured background, 0..255
  std::vector<DetectedObject> objects;  // largest first, at most two
};

// `frames`: F32 [3, F, H, W] in [-1, 1] (any float dtype) or U8 [F, H, W, 3]; InputError
// otherwise, or when a frame is smaller than 8x8.
Analysis analyze(const Tensor& frames);

// Each attribute is right when it is right for every expected object (objects are matched to
// detections to maximise agreement); `count` is right when exactly as many objects were found
// as expected. `overall` = all of them.
struct AdherenceScore {
  bool color = false, shape = false, motion = false, background = false, count = false;
  bool overall = false;
  Analysis analysis;
};

AdherenceScore score(const SceneAttributes& expected, const Analysis& analysis);
AdherenceScore score(const SceneAttributes& expected, const Tensor& frames);
AdherenceScore score(const SceneSpec& expected, const Tensor& frames);

// Accuracy over many clips.
struct AdherenceTally {
  int clips = 0;
  int color = 0, shape = 0, motion = 0, background = 0, count = 0, overall = 0;
  void add(const AdherenceScore& s);
  double rate(int correct) const { return clips ? static_cast<double>(correct) / clips : 0.0; }
  // "color 100.0%  shape 99.6%  motion 100.0%  background 100.0%  count 100.0%  overall 99.6%"
  std::string summary() const;
};

}  // namespace vidax::synth
