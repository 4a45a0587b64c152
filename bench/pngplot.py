"""A tiny RGB canvas that writes PNG: lines, markers, 5x7 bitmap text.

Pure python3 standard library (zlib + struct), for bench/report.py's plot on
machines without matplotlib. Coordinates are pixels, origin top-left.
"""
import struct
import zlib

# 5x7 glyphs, one int per row, bit 4 = leftmost column. Lower case is drawn
# as upper case.
_FONT = {
    " ": (0, 0, 0, 0, 0, 0, 0),
    "0": (14, 17, 19, 21, 25, 17, 14), "1": (4, 12, 4, 4, 4, 4, 14),
    "2": (14, 17, 1, 2, 4, 8, 31), "3": (31, 2, 4, 2, 1, 17, 14),
    "4": (2, 6, 10, 18, 31, 2, 2), "5": (31, 16, 30, 1, 1, 17, 14),
    "6": (6, 8, 16, 30, 17, 17, 14), "7": (31, 1, 2, 4, 8, 8, 8),
    "8": (14, 17, 17, 14, 17, 17, 14), "9": (14, 17, 17, 15, 1, 2, 12),
    "A": (14, 17, 17, 31, 17, 17, 17), "B": (30, 17, 17, 30, 17, 17, 30),
    "C": (14, 17, 16, 16, 16, 17, 14), "D": (28, 18, 17, 17, 17, 18, 28),
    "E": (31, 16, 16, 30, 16, 16, 31), "F": (31, 16, 16, 30, 16, 16, 16),
    "G": (14, 17, 16, 23, 17, 17, 15), "H": (17, 17, 17, 31, 17, 17, 17),
    "I": (14, 4, 4, 4, 4, 4, 14), "J": (7, 2, 2, 2, 2, 18, 12),
    "K": (17, 18, 20, 24, 20, 18, 17), "L": (16, 16, 16, 16, 16, 16, 31),
    "M": (17, 27, 21, 21, 17, 17, 17), "N": (17, 17, 25, 21, 19, 17, 17),
    "O": (14, 17, 17, 17, 17, 17, 14), "P": (30, 17, 17, 30, 16, 16, 16),
    "Q": (14, 17, 17, 17, 21, 18, 13), "R": (30, 17, 17, 30, 20, 18, 17),
    "S": (15, 16, 16, 14, 1, 1, 30), "T": (31, 4, 4, 4, 4, 4, 4),
    "U": (17, 17, 17, 17, 17, 17, 14), "V": (17, 17, 17, 17, 17, 10, 4),
    "W": (17, 17, 17, 21, 21, 21, 10), "X": (17, 17, 10, 4, 10, 17, 17),
    "Y": (17, 17, 17, 10, 4, 4, 4), "Z": (31, 1, 2, 4, 8, 16, 31),
    ".": (0, 0, 0, 0, 0, 12, 12), ",": (0, 0, 0, 0, 12, 4, 8),
    "%": (24, 25, 2, 4, 8, 19, 3), "/": (0, 1, 2, 4, 8, 16, 0),
    "-": (0, 0, 0, 31, 0, 0, 0), "+": (0, 4, 4, 31, 4, 4, 0),
    "(": (2, 4, 8, 8, 8, 4, 2), ")": (8, 4, 2, 2, 2, 4, 8),
    ":": (0, 12, 12, 0, 12, 12, 0), "=": (0, 0, 31, 0, 31, 0, 0),
    "_": (0, 0, 0, 0, 0, 0, 31), "*": (0, 4, 21, 14, 21, 4, 0),
    "<": (2, 4, 8, 16, 8, 4, 2), ">": (8, 4, 2, 1, 2, 4, 8),
    "#": (10, 10, 31, 10, 31, 10, 10), "'": (4, 4, 8, 0, 0, 0, 0),
}

GLYPH_W, GLYPH_H = 6, 8  # advance and line height of scale-1 text


class Canvas:
    def __init__(self, width, height, background=(255, 255, 255)):
        self.w, self.h = width, height
        self.px = bytearray(bytes(background) * (width * height))

    def set(self, x, y, color):
        x, y = int(round(x)), int(round(y))
        if 0 <= x < self.w and 0 <= y < self.h:
            i = 3 * (y * self.w + x)
            self.px[i:i + 3] = bytes(color)

    def get(self, x, y):
        i = 3 * (y * self.w + x)
        return tuple(self.px[i:i + 3])

    def rect(self, x0, y0, x1, y1, color):
        for y in range(int(y0), int(y1) + 1):
            for x in range(int(x0), int(x1) + 1):
                self.set(x, y, color)

    def line(self, x0, y0, x1, y1, color, width=1, dash=0):
        """Straight line; dash > 0 draws dash-pixel segments with equal gaps."""
        n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        r = (width - 1) / 2
        for i in range(n):
            if dash and (i // dash) % 2 == 1:
                continue
            t = i / max(n - 1, 1)
            x, y = x0 + (x1 - x0) * t, y0 + (y1 - y0) * t
            if width <= 1:
                self.set(x, y, color)
            else:
                self.rect(x - r, y - r, x + r, y + r, color)

    def marker(self, x, y, shape, color, size=4):
        if shape == "square":
            self.rect(x - size, y - size, x + size, y + size, color)
        elif shape == "diamond":
            for dy in range(-size, size + 1):
                k = size - abs(dy)
                self.rect(x - k, y + dy, x + k, y + dy, color)
        else:  # circle
            for dy in range(-size, size + 1):
                for dx in range(-size, size + 1):
                    if dx * dx + dy * dy <= size * size + 1:
                        self.set(x + dx, y + dy, color)

    def text(self, x, y, s, color=(0, 0, 0), scale=1):
        """Draws `s` with its top-left at (x, y); returns the width drawn."""
        for i, ch in enumerate(s):
            rows = _FONT.get(ch.upper(), _FONT["*"])
            for ry, bits in enumerate(rows):
                for rx in range(5):
                    if bits & (16 >> rx):
                        self.rect(x + (i * GLYPH_W + rx) * scale, y + ry * scale,
                                  x + (i * GLYPH_W + rx) * scale + scale - 1,
                                  y + ry * scale + scale - 1, color)
        return len(s) * GLYPH_W * scale

    def text_vertical(self, x, y, s, color=(0, 0, 0)):
        """Draws `s` rotated 90 degrees counter-clockwise, reading upwards
        from (x, y) (its bottom-left)."""
        for i, ch in enumerate(s):
            rows = _FONT.get(ch.upper(), _FONT["*"])
            for ry, bits in enumerate(rows):
                for rx in range(5):
                    if bits & (16 >> rx):
                        self.set(x + ry, y - (i * GLYPH_W + rx), color)

    def png(self):
        raw = bytearray()
        stride = 3 * self.w
        for y in range(self.h):
            raw.append(0)  # filter: none
            raw += self.px[y * stride:(y + 1) * stride]

        def chunk(kind, data):
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

        header = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                + chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))

    def save(self, path):
        with open(path, "wb") as f:
            f.write(self.png())


def read_png_size(data):
    """(width, height) of PNG bytes, or raises ValueError (for tests)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return struct.unpack(">II", data[16:24])


def decode_png_rgb(data):
    """Pixels of an 8-bit RGB PNG with filter 0 rows (what Canvas writes),
    as bytes; for tests."""
    w, h = read_png_size(data)
    pos, idat = 8, b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if zlib.crc32(kind + body) & 0xFFFFFFFF != struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]:
            raise ValueError(f"bad CRC in {kind!r}")
        if kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    out = bytearray()
    for y in range(h):
        row = raw[y * (3 * w + 1):(y + 1) * (3 * w + 1)]
        if row[0] != 0:
            raise ValueError("filtered row")
        out += row[1:]
    return w, h, bytes(out)
