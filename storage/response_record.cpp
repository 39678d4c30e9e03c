#include "storage/response_record.hpp"

#include <cctype>

#include "storage/byte_codec.hpp"

namespace mibyan {

namespace {

constexpr char response_format_v1 = 1;
constexpr size_t max_response_id_bytes = 128;

} // namespace

std::string encode_response(const stored_response& r) {
  std::string out;
  out.reserve(32 + r.id.size() + r.session_id.size() + r.object_json.size());
  out.push_back(response_format_v1);
  codec::put_bytes(out, r.id);
  codec::put_bytes(out, r.session_id);
  codec::put_varint(out, r.last_message_id);
  codec::put_svarint(out, r.created_at_ms);
  codec::put_bytes(out, r.object_json);
  return out;
}

bool decode_response(std::string_view in, stored_response& r) {
  if (!codec::get_format(in, response_format_v1))
    return false;
  return codec::get_string(in, r.id) && codec::get_string(in, r.session_id)
         && codec::get_varint(in, r.last_message_id)
         && codec::get_svarint(in, r.created_at_ms)
         && codec::get_string(in, r.object_json);
}

status check_response_id(std::string_view id) {
  auto bad = [](std::string msg) {
    return status::failure(status_code::invalid_argument, std::move(msg));
  };
  constexpr std::string_view prefix = "resp_";
  if (id.substr(0, prefix.size()) != prefix || id.size() == prefix.size())
    return bad("a response id starts with 'resp_'");
  if (id.size() > max_response_id_bytes)
    return bad("a response id has at most "
               + std::to_string(max_response_id_bytes) + " bytes");
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'
          || c == '-'))
      return bad("a response id may only contain letters, digits, _ and -");
  return {};
}

} // namespace mibyan
