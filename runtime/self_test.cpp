#include "runtime/runtime.hpp"

#include <utility>

#include "caf/all.hpp"
#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"

#include "messages/type_ids.hpp"

namespace mibyan {

namespace {

template <class T>
void round_trip(caf::actor_system& sys, std::vector<std::string>& failures) {
  auto name = caf::type_name<T>::value;
  auto msg = caf::make_message(T{});
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  if (auto err = msg.save(sink)) {
    failures.push_back(std::string{name} + ": cannot serialize: "
                       + sys.render(err));
    return;
  }
  if (buf.empty()) {
    failures.push_back(std::string{name} + ": serialized to nothing");
    return;
  }
  caf::message copy;
  caf::binary_deserializer source{sys, buf};
  if (auto err = copy.load(source)) {
    // Actor handles can only be read back inside a network connection
    // (CAF needs the connection's proxy registry); that the type was
    // written is what proves its registration.
    if (err == caf::sec::no_proxy_registry)
      return;
    failures.push_back(std::string{name} + ": cannot deserialize: "
                       + sys.render(err));
    return;
  }
  if (copy.size() != 1 || !copy.match_element<T>(0))
    failures.push_back(std::string{name} + ": round trip changed the type");
}

template <caf::type_id_t... Is>
void round_trip_all(caf::actor_system& sys, std::vector<std::string>& failures,
                    std::integer_sequence<caf::type_id_t, Is...>) {
  (round_trip<typename caf::type_by_id<caf::id_block::mibyan::begin + Is>::type>(
     sys, failures),
   ...);
}

} // namespace

std::vector<std::string> message_self_test(caf::actor_system& sys) {
  std::vector<std::string> failures;
  using block = caf::id_block::mibyan;
  round_trip_all(sys, failures,
                 std::make_integer_sequence<caf::type_id_t,
                                            block::end - block::begin>{});
  return failures;
}

} // namespace mibyan
