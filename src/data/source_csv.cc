// CSV source: RFC 4180 fields (quotes, doubled quotes, quoted line breaks),
// typed columns, one element of scalars per row.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>

#include "nimbus/base/error.h"
#include "src/data/file_stream.h"
#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

using Type = CsvOptions::Type;

const char* type_name(Type type) {
  switch (type) {
    case Type::kF32: return "f32";
    case Type::kF64: return "f64";
    case Type::kI32: return "i32";
    case Type::kI64: return "i64";
    case Type::kString: return "string";
  }
  return "?";
}

class CsvReader {
 public:
  CsvReader(const std::string& path, char delimiter)
      : path_(path), in_(path, sniff_compression(path)), delimiter_(delimiter) {}

  // The next row's fields, or nullopt at the end. row_line/row_offset say
  // where it started.
  std::optional<std::vector<std::string>> next_row() {
    std::vector<std::string> fields;
    std::string field;
    int c = get();
    if (c < 0) return std::nullopt;
    row_line_ = line_;
    row_offset_ = offset_ - 1;
    bool quoted = false, was_quoted = false;
    for (;; c = get()) {
      if (quoted) {
        if (c < 0) {
          throw DataError(fmt::format("CSV file '{}', line {} (byte offset {}): a quoted field is not closed before "
                                      "the end of the file",
                                      path_, row_line_, row_offset_),
                          "close the quote, or double quotes inside a quoted field (\"\")");
        }
        if (c == '"') {
          if (peek() == '"') {
            get();
            field += '"';
          } else {
            quoted = false;
          }
        } else {
          field += static_cast<char>(c);
        }
        continue;
      }
      if (c < 0 || c == '\n') {
        if (!field.empty() && field.back() == '\r' && !was_quoted) field.pop_back();
        fields.push_back(std::move(field));
        return fields;
      }
      if (c == '\r' && peek() == '\n') continue;
      if (c == delimiter_) {
        fields.push_back(std::move(field));
        field.clear();
        was_quoted = false;
      } else if (c == '"' && field.empty() && !was_quoted) {
        quoted = was_quoted = true;
      } else {
        field += static_cast<char>(c);
      }
    }
  }
  int64_t row_line() const { return row_line_; }
  uint64_t row_offset() const { return row_offset_; }
  const std::string& path() const { return path_; }

 private:
  int get() {
    if (!fill()) return -1;
    const int c = static_cast<unsigned char>(buffer_[pos_++]);
    offset_++;
    if (c == '\n') line_++;
    return c;
  }
  int peek() {
    if (!fill()) return -1;
    return static_cast<unsigned char>(buffer_[pos_]);
  }
  bool fill() {
    if (pos_ < size_) return true;
    size_ = in_.read(buffer_, sizeof(buffer_));
    pos_ = 0;
    return size_ > 0;
  }

  std::string path_;
  InputStream in_;
  char delimiter_;
  char buffer_[1 << 16];
  size_t pos_ = 0, size_ = 0;
  int64_t line_ = 1, row_line_ = 1;
  uint64_t offset_ = 0, row_offset_ = 0;
};

template <typename T>
T parse_number(const std::string& text, bool* ok) {
  T value{};
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  while (begin < end && (*begin == ' ' || *begin == '\t')) ++begin;
  while (end > begin && (end[-1] == ' ' || end[-1] == '\t')) --end;
  if (begin < end && *begin == '+') ++begin;
  const auto result = std::from_chars(begin, end, value);
  *ok = begin < end && result.ec == std::errc() && result.ptr == end;
  return value;
}

class CsvNode : public DatasetNode {
 public:
  CsvNode(std::vector<std::string> paths, CsvOptions options) : paths_(std::move(paths)), options_(std::move(options)) {
    if (paths_.empty()) throw InvalidArgument("csv: no files given");
    if (options_.column_types.empty()) {
      throw InvalidArgument("csv: no column types given", "set CsvOptions::column_types, one per column");
    }
    if (!options_.column_names.empty() && options_.column_names.size() != options_.column_types.size()) {
      throw InvalidArgument(fmt::format("csv: {} column names for {} column types", options_.column_names.size(),
                                        options_.column_types.size()));
    }
  }
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, "csv"), this);
  }
  std::string describe() const override {
    std::string types;
    for (Type t : options_.column_types) types += std::string(types.empty() ? "" : ",") + type_name(t);
    return fmt::format("csv({} files, first '{}', columns [{}], header={}{}{})", paths_.size(), paths_[0], types,
                       options_.header, options_.allow_non_finite ? ", non-finite allowed" : "",
                       options_.with_origin ? ", with origin" : "");
  }

  Element convert(const std::vector<std::string>& fields, const CsvReader& reader) const {
    const auto& types = options_.column_types;
    if (fields.size() != types.size()) {
      throw DataError(fmt::format("{}: expected {} columns, found {}", where(reader), types.size(), fields.size()),
                      "check the delimiter and quoting of that row, or the column types");
    }
    Element out;
    for (size_t i = 0; i < fields.size(); ++i) {
      bool ok = true;
      bool finite = true;
      Tensor t;
      switch (types[i]) {
        case Type::kString: t = string_tensor(fields[i]); break;
        case Type::kF32:
          t = host_tensor(Shape{}, DType::kF32);
          *t.data<float>() = parse_number<float>(fields[i], &ok);
          finite = std::isfinite(*t.data<float>());
          break;
        case Type::kF64:
          t = host_tensor(Shape{}, DType::kF64);
          *t.data<double>() = parse_number<double>(fields[i], &ok);
          finite = std::isfinite(*t.data<double>());
          break;
        case Type::kI32:
          t = host_tensor(Shape{}, DType::kI32);
          *t.data<int32_t>() = parse_number<int32_t>(fields[i], &ok);
          break;
        case Type::kI64:
          t = host_tensor(Shape{}, DType::kI64);
          *t.data<int64_t>() = parse_number<int64_t>(fields[i], &ok);
          break;
      }
      if (!ok) {
        throw DataError(fmt::format("{}, {}: {} is not a valid {}", where(reader), column(i), quote(fields[i]),
                                    type_name(types[i])));
      }
      if (!finite && !options_.allow_non_finite) {
        throw DataError(fmt::format("{}, {}: {} is not a finite number", where(reader), column(i), quote(fields[i])),
                        "fix or drop the row, or let float columns hold nan and inf (allow_non_finite)");
      }
      out.push_back(t);
    }
    if (options_.with_origin) out.push_back(string_tensor(origin(reader)));
    return out;
  }

 private:
  static std::string origin(const CsvReader& reader) {
    return fmt::format("CSV file '{}', line {}", reader.path(), reader.row_line());
  }
  static std::string where(const CsvReader& reader) {
    return fmt::format("{} (byte offset {})", origin(reader), reader.row_offset());
  }
  // "column 2 ('height')", 1-based as editors count.
  std::string column(size_t i) const {
    if (i < options_.column_names.size()) return fmt::format("column {} ('{}')", i + 1, options_.column_names[i]);
    return fmt::format("column {}", i + 1);
  }
  // The field in quotes, or only its start when it is long: a message never echoes megabytes.
  static std::string quote(const std::string& field) {
    constexpr size_t kShown = 40;
    if (field.size() <= kShown) return fmt::format("'{}'", field);
    return fmt::format("'{}...' ({} bytes)", field.substr(0, kShown), field.size());
  }

  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, const CsvNode* node) : IteratorImpl(std::move(stats)), node_(node) {}
    std::optional<Element> get_next() override {
      for (;;) {
        if (!reader_) {
          if (file_ >= node_->paths_.size()) return std::nullopt;
          reader_ = std::make_unique<CsvReader>(node_->paths_[file_++], node_->options_.delimiter);
          if (node_->options_.header) skip_row();
        }
        std::optional<std::vector<std::string>> row;
        try {
          row = reader_->next_row();
        } catch (const Error&) {
          reader_.reset();  // an unclosed quote or corrupt data ends this file
          throw;
        }
        if (!row) {
          reader_.reset();
          continue;
        }
        if (row->size() == 1 && (*row)[0].empty()) continue;  // blank line
        stats().source_reads++;
        return node_->convert(*row, *reader_);
      }
    }

   private:
    void skip_row() {
      try {
        reader_->next_row();
      } catch (const Error&) {
        reader_.reset();
        throw;
      }
    }
    const CsvNode* node_;
    size_t file_ = 0;
    std::unique_ptr<CsvReader> reader_;
  };
  std::vector<std::string> paths_;
  CsvOptions options_;
};

}  // namespace

NodePtr make_csv_node(std::vector<std::string> paths, CsvOptions options) {
  return std::make_shared<CsvNode>(std::move(paths), std::move(options));
}

}  // namespace nimbus::data::detail
