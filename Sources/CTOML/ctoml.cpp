// The C face of toml++ (include/ctoml.h): one parse, flattened into plain nodes that Swift reads.
#include "ctoml.h"

#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

namespace {

/// Everything a document's pointers point into.
struct Owner {
  toml::table root;
  std::vector<ctoml_node> nodes;
  std::string error;
};

ctoml_node makeNode(const toml::node &node, const toml::key *key) {
  ctoml_node out{};
  out.line = static_cast<uint32_t>(node.source().begin.line);
  out.column = static_cast<uint32_t>(node.source().begin.column);
  if (key) {
    out.key = key->str().data();
    out.key_length = key->str().size();
  }
  return out;
}

/// Appends `node` and its subtree in pre-order.
void flatten(const toml::node &node, const toml::key *key, std::vector<ctoml_node> &nodes) {
  ctoml_node out = makeNode(node, key);
  if (auto table = node.as_table()) {
    out.kind = CTOML_TABLE;
    out.child_count = table->size();
    nodes.push_back(out);
    for (auto &&[childKey, child] : *table) flatten(child, &childKey, nodes);
  } else if (auto array = node.as_array()) {
    out.kind = CTOML_ARRAY;
    out.child_count = array->size();
    nodes.push_back(out);
    for (auto &&child : *array) flatten(child, nullptr, nodes);
  } else if (auto string = node.as_string()) {
    out.kind = CTOML_STRING;
    out.string = string->get().data();
    out.string_length = string->get().size();
    nodes.push_back(out);
  } else if (auto integer = node.as_integer()) {
    out.kind = CTOML_INTEGER;
    out.integer = integer->get();
    nodes.push_back(out);
  } else if (auto floating = node.as_floating_point()) {
    out.kind = CTOML_FLOAT;
    out.floating = floating->get();
    nodes.push_back(out);
  } else if (auto boolean = node.as_boolean()) {
    out.kind = CTOML_BOOLEAN;
    out.integer = boolean->get() ? 1 : 0;
    nodes.push_back(out);
  } else {
    out.kind = CTOML_DATE_TIME;
    nodes.push_back(out);
  }
}

}  // namespace

extern "C" ctoml_document ctoml_parse(const char *text, size_t length) {
  ctoml_document document{};
  Owner *owner = new (std::nothrow) Owner();
  if (!owner) {
    document.error = "out of memory";
    return document;
  }
  document.owner = owner;
  try {
    owner->root = toml::parse(std::string_view(text, length));
    flatten(owner->root, nullptr, owner->nodes);
    document.nodes = owner->nodes.data();
    document.node_count = owner->nodes.size();
  } catch (const toml::parse_error &error) {
    owner->error = std::string(error.description());
    document.error = owner->error.c_str();
    document.error_line = static_cast<uint32_t>(error.source().begin.line);
    document.error_column = static_cast<uint32_t>(error.source().begin.column);
  } catch (const std::bad_alloc &) {
    document.nodes = nullptr;
    document.node_count = 0;
    document.error = "out of memory";
  }
  return document;
}

extern "C" void ctoml_free(ctoml_document *document) {
  delete static_cast<Owner *>(document->owner);
  *document = ctoml_document{};
}
