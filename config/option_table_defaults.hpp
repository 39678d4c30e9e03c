// File: config/option_table_defaults.hpp
//
// Defines each row macro of config/option_table.def that the includer has
// not defined as expanding to nothing, so an expansion defines only the
// macros it uses:
//
//   #define MIBYAN_SECTION(type, member, name, doc) ...
//   #include "config/option_table_defaults.hpp"
//   #include "config/option_table.def"
//   #include "config/option_table_undef.hpp"
//
// No include guard: included before every expansion.
#ifndef MIBYAN_SECTION
#define MIBYAN_SECTION(type, member, name, doc)
#endif
#ifndef MIBYAN_SECTION_END
#define MIBYAN_SECTION_END()
#endif
#ifndef MIBYAN_INT
#define MIBYAN_INT(member, key, dflt, lo, hi, doc)
#endif
#ifndef MIBYAN_BOOL
#define MIBYAN_BOOL(member, key, dflt, doc)
#endif
#ifndef MIBYAN_STRING
#define MIBYAN_STRING(member, key, dflt, doc)
#endif
#ifndef MIBYAN_SECRET
#define MIBYAN_SECRET(member, key, dflt, doc)
#endif
#ifndef MIBYAN_CHOICE
#define MIBYAN_CHOICE(member, key, dflt, values, doc)
#endif
#ifndef MIBYAN_CHECKED
#define MIBYAN_CHECKED(member, key, dflt, check, doc)
#endif
#ifndef MIBYAN_LIST
#define MIBYAN_LIST(member, key, dflt, doc)
#endif
#ifndef MIBYAN_FRACTION
#define MIBYAN_FRACTION(member, key, dflt, doc)
#endif
#ifndef MIBYAN_MAPPING
#define MIBYAN_MAPPING(key, doc)
#endif
#ifndef MIBYAN_CUSTOM
#define MIBYAN_CUSTOM(type, member, key, set, show, values, dflt, doc)
#endif
#ifndef MIBYAN_MEMBER
#define MIBYAN_MEMBER(type, member, dflt)
#endif
#ifndef MIBYAN_TOP
#define MIBYAN_TOP(type, member, key, set, show, values, doc)
#endif
