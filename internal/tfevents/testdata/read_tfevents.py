#!/usr/bin/env python3
"""Print the scalars of a TensorBoard events file, one JSON line each.

An independent check of the Go writer in internal/tfevents, written from the
format's description only and using nothing but the Python 3 standard library
(no tensorflow, tensorboard or protobuf):

  * TFRecord framing: uint64 little-endian length, uint32 masked CRC-32C of the
    8 length bytes, the data, uint32 masked CRC-32C of the data. Both CRCs are
    checked with the table-driven CRC-32C below (Castagnoli, reflected
    polynomial 0x82F63B78), not with any library's.
  * The data is a tensorflow.Event protocol buffer, decoded generically from the
    wire format: Event{wall_time=1 double, step=2 int64, file_version=3 string,
    summary=5 Summary}; Summary{value=1 repeated Value};
    Value{tag=1 string, simple_value=2 float}.

The first event must carry a file_version starting with "brain.Event:".

Usage: read_tfevents.py FILE

Output, one line per Summary.Value holding a simple_value, in file order:
  {"step": 3, "wall_time": 1700000000.25, "tag": "loss", "value": 0.5}
Non-finite values are printed as the strings "NaN", "Infinity" and "-Infinity",
which strict JSON parsers accept. Exit status 1 with a message on stderr for any
checksum mismatch, truncated record or malformed message.
"""

import json
import math
import struct
import sys

CASTAGNOLI_REFLECTED = 0x82F63B78
MASK_DELTA = 0xA282EAD8


def make_table(poly):
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return table


TABLE = make_table(CASTAGNOLI_REFLECTED)


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF


class FormatError(Exception):
    pass


def read_records(f):
    """Yield (offset, data) for each record, checking both CRCs."""
    offset = 0
    while True:
        header = f.read(12)
        if not header:
            return
        if len(header) < 12:
            raise FormatError("offset %d: truncated header" % offset)
        (length,) = struct.unpack("<Q", header[:8])
        (length_crc,) = struct.unpack("<I", header[8:])
        if length_crc != masked_crc32c(header[:8]):
            raise FormatError("offset %d: length CRC mismatch" % offset)
        body = f.read(length + 4)
        if len(body) < length + 4:
            raise FormatError("offset %d: truncated data" % offset)
        data = body[:length]
        (data_crc,) = struct.unpack("<I", body[length:])
        if data_crc != masked_crc32c(data):
            raise FormatError("offset %d: data CRC mismatch" % offset)
        yield offset, data
        offset += 12 + length + 4


def read_varint(buf, pos):
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise FormatError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise FormatError("varint too long")


def take(buf, pos, n):
    if pos + n > len(buf):
        raise FormatError("field runs past the end of its message")
    return buf[pos:pos + n], pos + n


def parse_message(buf):
    """Return [(field number, wire type, raw value)], in order.

    Raw values: int for varints, bytes for fixed32, fixed64 and
    length-delimited fields. Groups (wire types 3 and 4) are skipped.
    """
    fields = []
    pos = 0
    depth = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise FormatError("field number 0")
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value, pos = take(buf, pos, 8)
        elif wire == 2:
            length, pos = read_varint(buf, pos)
            value, pos = take(buf, pos, length)
        elif wire == 5:
            value, pos = take(buf, pos, 4)
        elif wire == 3:
            depth += 1
            continue
        elif wire == 4:
            if depth == 0:
                raise FormatError("unmatched end group")
            depth -= 1
            continue
        else:
            raise FormatError("wire type %d" % wire)
        if depth == 0:
            fields.append((number, wire, value))
    if depth:
        raise FormatError("unterminated group")
    return fields


def int64(varint):
    varint &= (1 << 64) - 1
    return varint - (1 << 64) if varint >= 1 << 63 else varint


def decode_value(buf):
    """Return (tag, simple_value or None) of a Summary.Value."""
    tag, simple = "", None
    for number, wire, raw in parse_message(buf):
        if number == 1 and wire == 2:
            tag = raw.decode("utf-8")
        elif number == 2 and wire == 5:
            (simple,) = struct.unpack("<f", raw)
    return tag, simple


def decode_event(buf):
    event = {"wall_time": 0.0, "step": 0, "file_version": None, "values": []}
    for number, wire, raw in parse_message(buf):
        if number == 1 and wire == 1:
            (event["wall_time"],) = struct.unpack("<d", raw)
        elif number == 2 and wire == 0:
            event["step"] = int64(raw)
        elif number == 3 and wire == 2:
            event["file_version"] = raw.decode("utf-8")
        elif number == 5 and wire == 2:
            for vnum, vwire, vraw in parse_message(raw):
                if vnum == 1 and vwire == 2:
                    event["values"].append(decode_value(vraw))
    return event


def json_float(x):
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: read_tfevents.py FILE\n")
        return 2
    try:
        with open(argv[1], "rb") as f:
            for index, (offset, data) in enumerate(read_records(f)):
                try:
                    event = decode_event(data)
                except (FormatError, UnicodeDecodeError) as e:
                    raise FormatError("offset %d: %s" % (offset, e))
                version = event["file_version"]
                if index == 0 and not (version or "").startswith("brain.Event:"):
                    raise FormatError("first event has no file_version")
                for tag, simple in event["values"]:
                    if simple is None:
                        continue
                    print(json.dumps({
                        "step": event["step"],
                        "wall_time": json_float(event["wall_time"]),
                        "tag": tag,
                        "value": json_float(simple),
                    }, allow_nan=False))
    except (FormatError, OSError) as e:
        sys.stderr.write("read_tfevents.py: %s: %s\n" % (argv[1], e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
