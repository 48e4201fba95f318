#include "nimbus/train/yaml_loader.h"

#include <fmt/format.h>
#include <yaml-cpp/anchor.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <vector>

#include "nimbus/base/error.h"

namespace nimbus::train {

namespace {

using Json = nlohmann::json;

// Builds the JSON from yaml-cpp's parser events (not YAML::Load's node graph, whose aliases share
// nodes and so can form cycles): every check happens as the text is read, before anything grows.
class JsonBuilder : public YAML::EventHandler {
 public:
  JsonBuilder(const std::string& text, std::string source, const YamlLimits& limits)
      : source_(std::move(source)),
        one_line_(std::count(text.begin(), text.end(), '\n') <= (text.ends_with('\n') ? 1 : 0)),
        limits_(limits) {}

  YamlDocument result() && { return {std::move(root_), std::move(lines_)}; }

  // `source:line`, or `source` alone for a one-line text (a --set value).
  std::string where(int line) const { return one_line_ ? source_ : fmt::format("{}:{}", source_, line); }
  std::string where(const YAML::Mark& mark) const { return mark.is_null() ? source_ : where(mark.line + 1); }

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (documents_++ > 0) {
      throw InvalidArgument(fmt::format("{}: a second YAML document starts here", where(mark)),
                            "a config is one document: remove the '---' line and what follows, or merge them");
    }
  }
  void OnDocumentEnd() override {}

  void OnAnchor(const YAML::Mark& mark, const std::string& name) override { pending_anchor_ = {name, mark.line + 1}; }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    start_value(mark, anchor, 1);
    count(1, mark);
    add(nullptr, {1, 1}, mark, anchor);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    if (value.size() > limits_.max_scalar_bytes) {
      throw InvalidArgument(fmt::format("{}: a value of {} bytes; the config loader takes at most {}", where(mark),
                                        value.size(), limits_.max_scalar_bytes),
                            "a config names files and sets numbers: put large data in a file and name the file");
    }
    start_value(mark, anchor, 1);
    count(1, mark);
    add(scalar_to_json(tag, value), {1, 1}, mark, anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto it = anchored_.find(anchor);
    if (it == anchored_.end()) {  // yaml-cpp knows the anchor, so its node is still open: it contains the alias
      const AnchorName& name = anchor_names_[anchor];
      throw InvalidArgument(fmt::format("{}: the alias *{} refers to the node that contains it (&{} at line {}): "
                                        "a cycle, which has no value",
                                        where(mark), name.name, name.name, name.line),
                            "an alias may only name a node that ends before it: copy the values out instead");
    }
    const Size& size = it->second.size;
    start_value(mark, 0, size.height);
    count(size.nodes, mark);
    add(Json(it->second.value), size, mark, 0);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(Json::array(), mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(Json::object(), mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  // A value's size once expanded: its nodes, and its height (1 for a scalar).
  struct Size {
    size_t nodes;
    int height;
  };
  // A mapping or list being read.
  struct Open {
    Json value;
    std::string path;
    YAML::Mark mark;
    YAML::anchor_t anchor;
    Size size{1, 1};
    std::optional<std::string> key{};  // a mapping's key whose value comes next
    int key_line = 0;
    std::map<std::string, int> key_lines{};  // each key's line, for duplicates
  };
  struct AnchorName {
    std::string name;
    int line = 0;
  };
  struct Anchored {
    Json value;
    Size size;
  };

  static Json scalar_to_json(const std::string& tag, const std::string& text) {
    if (tag == "!" || tag == "tag:yaml.org,2002:str") return text;  // quoted, or tagged a string
    if (text == "~" || text == "null" || text.empty()) return nullptr;
    if (text == "true" || text == "True") return true;
    if (text == "false" || text == "False") return false;
    const YAML::Node node(text);
    int64_t integer = 0;
    if (text.find_first_of(".eE") == std::string::npos && YAML::convert<int64_t>::decode(node, integer)) {
      return integer;
    }
    double number = 0;
    if (YAML::convert<double>::decode(node, number)) return number;
    return text;
  }

  // Checks and bookkeeping as a value (of `height` levels) begins: the anchor's name, the depth, and
  // the path it will have.
  void start_value(const YAML::Mark& mark, YAML::anchor_t anchor, int height) {
    if (anchor != 0) anchor_names_[anchor] = pending_anchor_;
    if (static_cast<int>(open_.size()) + height > limits_.max_depth) {
      throw InvalidArgument(fmt::format("{}: mappings and lists nest more than {} levels deep{}", where(mark),
                                        limits_.max_depth, height > 1 ? " once this alias is expanded" : ""),
                            "a config is a few levels deep: look for brackets that never close, or aliases of aliases");
    }
    next_path_ = open_.empty() ? "" : child_path(open_.back());
  }

  std::string child_path(const Open& parent) const {
    if (parent.value.is_array()) return fmt::format("{}[{}]", parent.path, parent.value.size());
    if (!parent.key) return parent.path;  // a key itself
    return parent.path.empty() ? *parent.key : fmt::format("{}.{}", parent.path, *parent.key);
  }

  void count(size_t nodes, const YAML::Mark& mark) {
    nodes_ += nodes;
    if (nodes_ > limits_.max_nodes) {
      throw InvalidArgument(fmt::format("{}: the config holds more than {} values once its aliases are expanded",
                                        where(mark), limits_.max_nodes),
                            "aliases of aliases multiply: write the values out, or use fewer levels of aliases");
    }
  }

  // (A mapping or list in a key's place is refused when it closes, in set_key: yaml-cpp reads an
  // unclosed '[' as such a key before it reports the missing ']', the better message.)
  void open(Json container, const YAML::Mark& mark, YAML::anchor_t anchor) {
    start_value(mark, anchor, 1);
    count(1, mark);
    open_.push_back({std::move(container), next_path_, mark, anchor});
  }

  void close() {
    Open done = std::move(open_.back());
    open_.pop_back();
    add(std::move(done.value), done.size, done.mark, done.anchor);
  }

  // Puts a finished value (a scalar, an alias's copy or a closed container) in its place.
  void add(Json value, Size size, const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (anchor != 0) anchored_[anchor] = {value, size};
    if (open_.empty()) {
      root_ = std::move(value);
      return;
    }
    Open& parent = open_.back();
    parent.size.nodes += size.nodes;
    if (parent.value.is_object() && !parent.key) {
      set_key(parent, value, mark);
      return;
    }
    parent.size.height = std::max(parent.size.height, size.height + 1);
    if (parent.value.is_array()) {
      lines_.emplace(child_path(parent), mark.line + 1);
      parent.value.push_back(std::move(value));
      return;
    }
    const std::string path = child_path(parent);
    lines_[path] = parent.key_line;
    parent.value[*parent.key] = std::move(value);
    parent.key.reset();
  }

  void set_key(Open& parent, const Json& key, const YAML::Mark& mark) {
    if (key.is_object() || key.is_array()) {
      throw InvalidArgument(fmt::format("{}: a mapping's key must be a name, not a mapping or a list", where(mark)),
                            "write the key as a plain word: `epochs: 3`");
    }
    const std::string name = key.is_string() ? key.get<std::string>() : key.is_null() ? "" : key.dump();
    const int line = mark.line + 1;
    const auto [previous, inserted] = parent.key_lines.emplace(name, line);
    if (!inserted) {
      const std::string path = parent.path.empty() ? name : fmt::format("{}.{}", parent.path, name);
      throw InvalidArgument(fmt::format("{}: the key '{}' appears twice in one mapping (lines {} and {})", where(mark),
                                        path, previous->second, line),
                            "keep one of them: YAML forbids repeated keys, and nimbus does not pick one silently");
    }
    parent.key = name;
    parent.key_line = line;
  }

  std::string source_;
  bool one_line_;
  YamlLimits limits_;
  int documents_ = 0;
  size_t nodes_ = 0;
  std::vector<Open> open_;
  std::string next_path_;
  AnchorName pending_anchor_;
  std::map<YAML::anchor_t, AnchorName> anchor_names_;
  std::map<YAML::anchor_t, Anchored> anchored_;
  Json root_;
  std::map<std::string, int> lines_;
};

// yaml-cpp's syntax messages, in words that say what to look for.
std::string describe_syntax_error(const std::string& message) {
  const std::pair<const char*, const char*> described[] = {
      {YAML::ErrorMsg::END_OF_MAP_FLOW, "a '{' that is never closed with '}'"},
      {YAML::ErrorMsg::END_OF_SEQ_FLOW, "a '[' that is never closed with ']'"},
      {YAML::ErrorMsg::END_OF_MAP, "a mapping that ends where it cannot (check the indentation)"},
      {YAML::ErrorMsg::END_OF_SEQ, "a list that ends where it cannot (check the indentation)"},
      {YAML::ErrorMsg::MAP_VALUE, "a ':' where no value can start (check the indentation, and the space after ':')"},
      {YAML::ErrorMsg::MAP_KEY, "a key where none can start (check the indentation)"},
      {YAML::ErrorMsg::BLOCK_ENTRY, "a '- ' list item where none can start (check the indentation)"},
      {YAML::ErrorMsg::TAB_IN_INDENTATION, "a tab in the indentation (YAML indents with spaces)"},
      {YAML::ErrorMsg::EOF_IN_SCALAR, "a quoted value that never ends"},
      {YAML::ErrorMsg::UNKNOWN_ANCHOR, "an alias (*name) with no anchor (&name) before it"},
      {YAML::ErrorMsg::BAD_FILE, "mappings and lists nested too deeply"},
  };
  for (const auto& [yaml_cpp, words] : described) {
    if (message == yaml_cpp) return words;
  }
  return message;
}

}  // namespace

YamlDocument load_yaml(const std::string& text, const std::string& source, const YamlLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw InvalidArgument(
        fmt::format("{}: {} bytes; the config loader reads at most {}", source, text.size(), limits.max_bytes),
        "is this the config? A config names its data files; it does not hold the data");
  }
  JsonBuilder builder(text, source, limits);
  std::istringstream stream(text);
  try {
    YAML::Parser parser(stream);
    while (parser.HandleNextDocument(builder)) {
    }
  } catch (const YAML::Exception& error) {
    throw InvalidArgument(
        fmt::format("{}: not valid YAML: {}", builder.where(error.mark), describe_syntax_error(error.msg)),
        "fix the YAML at that line: indentation by spaces, a space after each ':', and every "
        "bracket and quote closed");
  }
  return std::move(builder).result();
}

}  // namespace nimbus::train
