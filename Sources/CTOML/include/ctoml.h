// A C face for toml++ (Debian's libtomlplusplus): parse a TOML text into a flat, read-only list of nodes. No C++
// type crosses it, so Swift reads it without C++ interop; only TOMLConfig imports it.
#ifndef CTOML_H
#define CTOML_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The kind of a node.
typedef enum {
  CTOML_TABLE = 0,
  CTOML_ARRAY = 1,
  CTOML_STRING = 2,
  CTOML_INTEGER = 3,
  CTOML_FLOAT = 4,
  CTOML_BOOLEAN = 5,
  /// A date, a time or a date-time: configuration reads none, so its value is not carried.
  CTOML_DATE_TIME = 6,
} ctoml_kind;

/// One node of a parsed document. Nodes are in pre-order: a table's or an array's `child_count` children (each
/// with its own subtree) follow it. Pointers stay valid until `ctoml_free`.
typedef struct {
  ctoml_kind kind;
  /// Where the node starts in the text, 1-based (toml++'s source region).
  uint32_t line;
  uint32_t column;
  /// The node's key in its table, UTF-8, `key_length` bytes; NULL for the root and for array elements.
  const char *key;
  size_t key_length;
  /// A string's UTF-8 bytes (CTOML_STRING), `string_length` of them (it may hold NUL).
  const char *string;
  size_t string_length;
  /// An integer's value (CTOML_INTEGER); 0 or 1 for a boolean.
  int64_t integer;
  /// A float's value (CTOML_FLOAT).
  double floating;
  /// How many direct children follow (CTOML_TABLE, CTOML_ARRAY).
  size_t child_count;
} ctoml_node;

/// What `ctoml_parse` gives: `nodes` (the root table first) or, when `nodes` is NULL, an error.
typedef struct {
  const ctoml_node *nodes;
  size_t node_count;
  /// toml++'s description of a syntax error (NUL-terminated), or of a failure to allocate; NULL on success.
  const char *error;
  /// Where the error starts, 1-based; 0 when unknown.
  uint32_t error_line;
  uint32_t error_column;
  /// What owns the memory (the parsed tree, the node list, the message): give the whole result to `ctoml_free`.
  void *owner;
} ctoml_document;

/// Parses `length` bytes of UTF-8 TOML at `text` (NUL bytes are part of the text). Never throws, never aborts on
/// bad input. Free the result with `ctoml_free`, whether it succeeded or not.
ctoml_document ctoml_parse(const char *text, size_t length);

/// Frees what `ctoml_parse` returned; `document` may then no longer be read.
void ctoml_free(ctoml_document *document);

#ifdef __cplusplus
}
#endif

#endif
