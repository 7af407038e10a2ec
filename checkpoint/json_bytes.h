// JSON text whose strings may hold any bytes (a path is bytes, not UTF-8). nlohmann::json's dump
// throws (type_error.316) on a string that is not valid UTF-8, or with `replace` turns each bad
// byte into U+FFFD, so the text no longer names the file. DumpJson writes the same text as
// nlohmann's dump(indent) for valid UTF-8, and escapes each byte that is not part of a valid UTF-8
// sequence losslessly as the lone surrogate \udcXX (XX: the byte, 80..ff), the "surrogateescape"
// convention of PEP 383: Python's json.loads then os.fsencode() gives the exact bytes back
// (checkpoint/README.md and tools/repro/README.md document it). Header-only: mxdiff's audit
// library and repro both use it without linking each other.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace mxdiff::cli {

// The length of the valid UTF-8 sequence at the start of `s` (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), 0 when it does not start with one.
inline size_t Utf8SequenceLength(std::string_view s) {
  const auto byte = [&](size_t i) { return uint8_t(s[i]); };
  const uint8_t b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t length = 0;
  uint8_t low = 0x80, high = 0xbf;  // the range of the second byte
  if (b0 >= 0xc2 && b0 <= 0xdf) length = 2;
  else if (b0 == 0xe0) length = 3, low = 0xa0;
  else if (b0 >= 0xe1 && b0 <= 0xec) length = 3;
  else if (b0 == 0xed) length = 3, high = 0x9f;
  else if (b0 >= 0xee && b0 <= 0xef) length = 3;
  else if (b0 == 0xf0) length = 4, low = 0x90;
  else if (b0 >= 0xf1 && b0 <= 0xf3) length = 4;
  else if (b0 == 0xf4) length = 4, high = 0x8f;
  else return 0;
  if (s.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return length;
}

// `bytes` as a quoted JSON string: valid UTF-8 as is, '"', '\\' and control characters escaped
// as nlohmann escapes them, every other byte as \udcXX.
inline std::string JsonString(std::string_view bytes) {
  std::string out = "\"";
  for (size_t i = 0; i < bytes.size();) {
    const uint8_t c = uint8_t(bytes[i]);
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      default: break;
    }
    if (c < 0x20) {  // the other control characters, as nlohmann writes them
      out += fmt::format("\\u{:04x}", c);
      ++i;
      continue;
    }
    const size_t length = Utf8SequenceLength(bytes.substr(i));
    if (length == 0) {
      out += fmt::format("\\udc{:02x}", c);
      ++i;
    } else {
      out.append(bytes.substr(i, length));
      i += length;
    }
  }
  return out + "\"";
}

namespace json_bytes_detail {

template <class Json>  // nlohmann::json or nlohmann::ordered_json
void Dump(const Json& value, int indent, int depth, std::string& out) {
  const bool pretty = indent >= 0;
  const auto newline = [&](int level) {
    if (pretty) out += "\n" + std::string(size_t(indent) * size_t(level), ' ');
  };
  if (value.is_string()) {
    out += JsonString(value.template get_ref<const std::string&>());
  } else if (value.is_object()) {
    if (value.empty()) {
      out += "{}";
      return;
    }
    out += "{";
    bool first = true;
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!first) out += ",";
      first = false;
      newline(depth + 1);
      out += JsonString(it.key());
      out += pretty ? ": " : ":";
      Dump(it.value(), indent, depth + 1, out);
    }
    newline(depth);
    out += "}";
  } else if (value.is_array()) {
    if (value.empty()) {
      out += "[]";
      return;
    }
    out += "[";
    bool first = true;
    for (const Json& element : value) {
      if (!first) out += ",";
      first = false;
      newline(depth + 1);
      Dump(element, indent, depth + 1, out);
    }
    newline(depth);
    out += "]";
  } else {
    out += value.dump();  // numbers, booleans, null, binary: no strings inside
  }
}

}  // namespace json_bytes_detail

// nlohmann's value.dump(indent) (-1: compact), strings escaped by JsonString; Json is
// nlohmann::json or nlohmann::ordered_json (members in the value's own order).
template <class Json>
std::string DumpJson(const Json& value, int indent = -1) {
  std::string out;
  json_bytes_detail::Dump(value, indent, 0, out);
  return out;
}

// The same text made readable by nlohmann's parser, which refuses a lone surrogate: each \udcXX
// escape of a byte (XX 80..ff, not after a high surrogate) becomes \ufffd. For reading our own
// reports back in C++ (a verdict needs no path), never for writing.
inline std::string ByteEscapesReplaced(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false, after_high_surrogate = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!in_string || c != '\\' || i + 1 >= text.size()) {
      if (c == '"') in_string = !in_string;
      after_high_surrogate = false;
      out += c;
      continue;
    }
    if (text[i + 1] != 'u' || i + 6 > text.size()) {  // a two-character escape: \" \\ \n ...
      out.append(text.substr(i, 2));
      ++i;
      after_high_surrogate = false;
      continue;
    }
    const std::string_view hex = text.substr(i + 2, 4);
    unsigned value = 0;
    for (char h : hex) value = value * 16 + unsigned(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    const bool byte_escape = value >= 0xDC80 && value <= 0xDCFF && !after_high_surrogate;
    out += byte_escape ? std::string_view("\\ufffd") : text.substr(i, 6);
    after_high_surrogate = value >= 0xD800 && value <= 0xDBFF;
    i += 5;
  }
  return out;
}

}  // namespace mxdiff::cli
