#include "corpora/loaders.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/safe_path.h"

namespace lazyscope::corpora {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void fail(const fs::path& file, const std::string& where, const std::string& what) {
  throw Error(file.string() + ": " + where + (where.empty() ? "" : ": ") + what);
}

std::string read_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(path, "", "is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "", "cannot open for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) fail(path, "", "read error");
  return buffer.str();
}

void report(const LoadOptions& options, double fraction, std::string_view what) {
  if (options.progress) options.progress(std::clamp(fraction, 0.0, 1.0), what);
}

std::size_t line_of_offset(const std::string& text, std::size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + std::size_t(std::count(text.begin(), text.begin() + std::ptrdiff_t(offset), '\n'));
}

// Parses a whole JSON document; syntax errors name the line.
json parse_json(const fs::path& path, const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    std::size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    fail(path, "line " + std::to_string(line_of_offset(text, byte)),
         std::string("invalid JSON (") + e.what() + ")");
  } catch (const json::exception& e) {  // a number too large for a double, ...
    fail(path, "", std::string("invalid JSON (") + e.what() + ")");
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

// Visits each non-blank line of a JSON Lines text as (1-based line number, parsed object).
template <typename Visit>
void for_each_json_line(const fs::path& path, const std::string& text, const LoadOptions& options,
                        Visit&& visit) {
  std::size_t pos = 0;
  std::size_t line = 0;
  std::size_t next_report = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line;
    std::string_view content = trim(std::string_view(text).substr(pos, end - pos));
    pos = end + 1;
    if (content.empty()) continue;
    json value;
    try {
      value = json::parse(content);
    } catch (const json::exception& e) {
      fail(path, "line " + std::to_string(line), std::string("invalid JSON (") + e.what() + ")");
    }
    if (!value.is_object()) fail(path, "line " + std::to_string(line), "expected a JSON object");
    visit(line, value);
    if (pos >= next_report) {
      report(options, double(pos) / double(text.size()), "reading " + path.filename().string());
      next_report = pos + (1 << 20);
    }
  }
}

// An id may be written as a string or an integer.
std::optional<std::string> id_field(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  return std::nullopt;
}

std::string string_field(const json& object, const char* key, const fs::path& path,
                         const std::string& where, bool required) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    if (required) fail(path, where, std::string("missing \"") + key + "\"");
    return {};
  }
  if (!it->is_string()) fail(path, where, std::string("\"") + key + "\" must be a string");
  return it->get<std::string>();
}

std::vector<std::string> string_list(const json& value, const char* key, const fs::path& path,
                                     const std::string& where) {
  if (!value.is_array())
    fail(path, where, std::string("\"") + key + "\" must be an array of strings");
  std::vector<std::string> out;
  for (const json& item : value) {
    if (item.is_string())
      out.push_back(item.get<std::string>());
    else if (item.is_number_integer())
      out.push_back(std::to_string(item.get<int64_t>()));
    else
      fail(path, where, std::string("\"") + key + "\" must be an array of strings");
  }
  return out;
}

void add_unique(std::vector<std::string>& list, std::string value) {
  if (value.empty()) return;
  if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(std::move(value));
}

// Joins dataset sentences (HotpotQA keeps their leading spaces) into one paragraph.
std::string join_sentences(const std::vector<std::string>& sentences) {
  std::string out;
  for (const std::string& s : sentences) {
    std::string_view t = trim(s);
    if (t.empty()) continue;
    if (!out.empty()) out.push_back(' ');
    out.append(t);
  }
  return out;
}

// ---- HotpotQA / 2WikiMultihopQA ----

CorpusData load_multihop(const fs::path& path, const LoadOptions& options, const char* dataset) {
  const std::string text = read_file(path);
  report(options, 0.0, std::string("reading ") + path.filename().string());
  CorpusData data;
  std::map<std::string, std::size_t> doc_index;  // title -> index in data.documents

  auto visit = [&](const json& record, const std::string& where) {
    if (!record.is_object()) fail(path, where, "expected a JSON object");
    std::string qid = id_field(record, "_id").value_or(id_field(record, "id").value_or(""));
    std::string where_id = qid.empty() ? where : where + " (_id " + qid + ")";
    auto context = record.find("context");
    if (context == record.end()) fail(path, where_id, "missing \"context\"");
    // HF datasets store context as {"title":[...], "sentences":[[...]]}; the originals as pairs.
    std::vector<std::pair<std::string, std::vector<std::string>>> paragraphs;
    if (context->is_object()) {
      auto titles = context->find("title");
      auto sents = context->find("sentences");
      if (titles == context->end() || sents == context->end() || !titles->is_array() ||
          !sents->is_array() || titles->size() != sents->size())
        fail(path, where_id, "\"context\" must be [[title, [sentences]], ...]");
      for (std::size_t i = 0; i < titles->size(); ++i) {
        if (!(*titles)[i].is_string()) fail(path, where_id, "context title must be a string");
        paragraphs.emplace_back((*titles)[i].get<std::string>(),
                                string_list((*sents)[i], "context sentences", path, where_id));
      }
    } else if (context->is_array()) {
      std::size_t i = 0;
      for (const json& pair : *context) {
        std::string at = where_id + ": context[" + std::to_string(i++) + "]";
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string())
          fail(path, at, "must be [title, [sentences]]");
        paragraphs.emplace_back(pair[0].get<std::string>(),
                                string_list(pair[1], "sentences", path, at));
      }
    } else {
      fail(path, where_id, "\"context\" must be [[title, [sentences]], ...]");
    }
    for (auto& [title, sentences] : paragraphs) {
      if (doc_index.count(title)) continue;
      Document doc;
      doc.id = title;
      doc.title = title;
      doc.text = join_sentences(sentences);
      if (doc.text.empty()) continue;
      doc_index.emplace(title, data.documents.size());
      data.documents.push_back(std::move(doc));
    }
    // The test split has no answers: its paragraphs are still useful documents.
    auto answer = record.find("answer");
    if (answer == record.end() || answer->is_null()) return;
    Question q;
    q.id =
        qid.empty() ? std::string(dataset) + ":" + std::to_string(data.questions.size() + 1) : qid;
    q.question = string_field(record, "question", path, where_id, true);
    if (!answer->is_string()) fail(path, where_id, "\"answer\" must be a string");
    q.answers.push_back(answer->get<std::string>());
    if (record.contains("type") && record["type"].is_string())
      q.kind = record["type"].get<std::string>();
    auto facts = record.find("supporting_facts");
    if (facts != record.end() && facts->is_array()) {
      for (const json& fact : *facts) {
        if (!fact.is_array() || fact.empty() || !fact[0].is_string())
          fail(path, where_id, "\"supporting_facts\" must be [[title, sentence index], ...]");
        std::string title = fact[0].get<std::string>();
        if (doc_index.count(title)) add_unique(q.doc_ids, title);  // fullwiki may lack the gold
      }
    } else if (facts != record.end() && facts->is_object() && facts->contains("title")) {
      for (const std::string& title :
           string_list((*facts)["title"], "supporting_facts.title", path, where_id))
        if (doc_index.count(title)) add_unique(q.doc_ids, title);
    }
    data.questions.push_back(std::move(q));
  };

  std::string_view head = trim(text);
  if (head.empty()) fail(path, "", "file is empty");
  if (head.front() == '[') {
    // Records are handled as the parser completes them and then dropped, so a large training
    // file never exists as one JSON tree in memory.
    std::size_t index = 0;
    auto each_record = [&](int depth, json::parse_event_t event, json& parsed) {
      bool element_done = depth == 1 && (event == json::parse_event_t::object_end ||
                                         event == json::parse_event_t::array_end ||
                                         event == json::parse_event_t::value);
      if (!element_done) return true;
      visit(parsed, "record " + std::to_string(++index));
      if (index % 1000 == 0) report(options, 0.5, "parsing records");
      return false;
    };
    try {
      json emptied = json::parse(text, each_record);  // only the outer array is left
      (void)emptied;
    } catch (const json::parse_error& e) {
      std::size_t byte = e.byte > 0 ? e.byte - 1 : 0;
      fail(path, "line " + std::to_string(line_of_offset(text, byte)),
           std::string("invalid JSON (") + e.what() + ")");
    } catch (const json::exception& e) {  // a number too large for a double, ...
      fail(path, "", std::string("invalid JSON (") + e.what() + ")");
    }
  } else {
    for_each_json_line(path, text, options, [&](std::size_t line, const json& record) {
      visit(record, "line " + std::to_string(line));
    });
  }
  report(options, 1.0, "loaded");
  return data;
}

// ---- CSV (RFC 4180: quoted fields, "" escapes, newlines inside quotes) ----

struct CsvRecord {
  std::size_t line = 0;  // line where the record starts
  std::vector<std::string> fields;
};

std::vector<CsvRecord> parse_csv(const fs::path& path, const std::string& text) {
  std::vector<CsvRecord> records;
  std::size_t i = 0;
  std::size_t line = 1;
  if (text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;  // UTF-8 BOM
  while (i < text.size()) {
    CsvRecord record;
    record.line = line;
    std::string field;
    bool done = false;
    while (!done) {
      if (i < text.size() && text[i] == '"') {
        std::size_t quote_line = line;
        ++i;
        while (true) {
          if (i >= text.size())
            fail(path, "line " + std::to_string(quote_line), "unterminated quoted field");
          char c = text[i++];
          if (c == '"') {
            if (i < text.size() && text[i] == '"') {
              field.push_back('"');
              ++i;
            } else {
              break;
            }
          } else {
            if (c == '\n') ++line;
            field.push_back(c);
          }
        }
        if (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r')
          fail(path, "line " + std::to_string(line), "unexpected character after a closing quote");
      } else {
        while (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
          if (text[i] == '"')
            fail(path, "line " + std::to_string(line), "quote inside an unquoted field");
          field.push_back(text[i++]);
        }
      }
      record.fields.push_back(std::move(field));
      field.clear();
      if (i >= text.size()) {
        done = true;
      } else if (text[i] == ',') {
        ++i;
      } else {
        if (text[i] == '\r') ++i;
        if (i < text.size() && text[i] == '\n') ++i;
        ++line;
        done = true;
      }
    }
    bool blank = record.fields.size() == 1 && record.fields[0].empty();
    if (!blank) records.push_back(std::move(record));
  }
  return records;
}

struct CsvTable {
  fs::path path;
  std::map<std::string, std::size_t> columns;
  std::vector<CsvRecord> rows;

  std::optional<std::size_t> column(const std::string& name) const {
    auto it = columns.find(name);
    return it == columns.end() ? std::nullopt : std::optional<std::size_t>(it->second);
  }
  std::size_t require(const std::string& name) const {
    auto c = column(name);
    if (!c) fail(path, "line 1", "missing column \"" + name + "\"");
    return *c;
  }
};

CsvTable read_csv(const fs::path& path) {
  CsvTable table;
  table.path = path;
  std::vector<CsvRecord> records = parse_csv(path, read_file(path));
  if (records.empty()) fail(path, "", "file is empty (expected a header row)");
  for (std::size_t i = 0; i < records[0].fields.size(); ++i)
    table.columns[std::string(trim(records[0].fields[i]))] = i;
  std::size_t width = records[0].fields.size();
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].fields.size() != width)
      fail(path, "line " + std::to_string(records[r].line),
           "expected " + std::to_string(width) + " fields, found " +
               std::to_string(records[r].fields.size()));
    table.rows.push_back(std::move(records[r]));
  }
  return table;
}

fs::path first_existing(const std::vector<fs::path>& candidates) {
  std::error_code ec;
  for (const auto& p : candidates)
    if (fs::is_regular_file(p, ec)) return p;
  return {};
}

}  // namespace

CorpusFormat parse_corpus_format(std::string_view name) {
  if (name == "hotpotqa" || name == "hotpot") return CorpusFormat::hotpotqa;
  if (name == "2wiki" || name == "2wikimultihopqa") return CorpusFormat::two_wiki;
  if (name == "triviaqa") return CorpusFormat::triviaqa;
  if (name == "narrativeqa") return CorpusFormat::narrativeqa;
  if (name == "jsonl") return CorpusFormat::jsonl;
  throw Error("unknown corpus format \"" + std::string(name) +
              "\" (expected hotpotqa, 2wiki, triviaqa, narrativeqa or jsonl)");
}

std::string_view corpus_format_name(CorpusFormat format) {
  switch (format) {
    case CorpusFormat::hotpotqa:
      return "hotpotqa";
    case CorpusFormat::two_wiki:
      return "2wiki";
    case CorpusFormat::triviaqa:
      return "triviaqa";
    case CorpusFormat::narrativeqa:
      return "narrativeqa";
    case CorpusFormat::jsonl:
      return "jsonl";
  }
  return "unknown";
}

CorpusData load_hotpotqa(const fs::path& path, const LoadOptions& options) {
  return load_multihop(path, options, "hotpotqa");
}

CorpusData load_2wiki(const fs::path& path, const LoadOptions& options) {
  return load_multihop(path, options, "2wiki");
}

CorpusData load_triviaqa(const fs::path& path, const LoadOptions& options) {
  const std::string text = read_file(path);
  report(options, 0.0, "reading " + path.filename().string());
  json root = parse_json(path, text);
  const json* records = nullptr;
  if (root.is_object() && root.contains("Data") && root["Data"].is_array())
    records = &root["Data"];
  else if (root.is_array())
    records = &root;
  else
    fail(path, "", "expected an object with a \"Data\" array (TriviaQA RC layout)");

  fs::path evidence = options.evidence_dir;
  if (evidence.empty()) {
    fs::path dir = path.parent_path();
    std::error_code ec;
    evidence =
        fs::is_directory(dir / ".." / "evidence", ec) ? dir / ".." / "evidence" : dir / "evidence";
  }

  CorpusData data;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < records->size(); ++i) {
    const json& record = (*records)[i];
    std::string where = "record " + std::to_string(i + 1);
    if (!record.is_object()) fail(path, where, "expected a JSON object");
    Question q;
    q.id = id_field(record, "QuestionId").value_or("triviaqa:" + std::to_string(i + 1));
    where += " (QuestionId " + q.id + ")";
    q.question = string_field(record, "Question", path, where, true);
    q.kind = "single";
    auto answer = record.find("Answer");
    if (answer != record.end() && !answer->is_null()) {
      if (!answer->is_object()) fail(path, where, "\"Answer\" must be an object with \"Value\"");
      add_unique(q.answers, string_field(*answer, "Value", path, where, true));
      if (answer->contains("Aliases"))
        for (std::string& alias : string_list((*answer)["Aliases"], "Aliases", path, where))
          add_unique(q.answers, std::move(alias));
    }
    for (const auto& [key, folder] :
         {std::pair{"EntityPages", "wikipedia"}, std::pair{"SearchResults", "web"}}) {
      auto pages = record.find(key);
      if (pages == record.end() || pages->is_null()) continue;
      if (!pages->is_array()) fail(path, where, std::string("\"") + key + "\" must be an array");
      for (const json& page : *pages) {
        if (!page.is_object())
          fail(path, where, std::string("\"") + key + "\" entries must be objects");
        std::string filename = string_field(page, "Filename", path, where, true);
        std::string id = std::string(folder) + "/" + filename;
        add_unique(q.doc_ids, id);
        if (!seen.insert(id).second) continue;
        Document doc;
        doc.id = id;
        doc.title = string_field(page, "Title", path, where, false);
        for (const char* inline_key : {"Content", "wiki_context", "search_context"})
          if (page.contains(inline_key) && page[inline_key].is_string())
            doc.text = page[inline_key].get<std::string>();
        if (doc.text.empty()) {
          fs::path file;
          try {
            file = join_inside(evidence / folder, filename, "\"Filename\"");
          } catch (const Error& e) {
            fail(path, where, e.what());
          }
          std::error_code ec;
          if (!fs::is_regular_file(file, ec))
            fail(path, where,
                 "evidence file " + file.string() + " not found (set the evidence directory)");
          doc.text = read_file(file);
        }
        doc.text = std::string(trim(doc.text));
        if (doc.title.empty()) doc.title = fs::path(filename).stem().string();
        data.documents.push_back(std::move(doc));
      }
    }
    if (!q.answers.empty()) data.questions.push_back(std::move(q));
    if (i % 100 == 0) report(options, double(i) / double(records->size()), "reading evidence");
  }
  report(options, 1.0, "loaded");
  return data;
}

CorpusData load_narrativeqa(const fs::path& path, const LoadOptions& options) {
  report(options, 0.0, "reading " + path.filename().string());
  CsvTable qaps = read_csv(path);
  std::size_t col_doc = qaps.require("document_id");
  std::size_t col_question = qaps.require("question");
  std::size_t col_answer1 = qaps.require("answer1");
  std::optional<std::size_t> col_answer2 = qaps.column("answer2");
  std::optional<std::size_t> col_inline_summary = qaps.column("summary");

  // document_id -> (title, summary), in first-seen order.
  std::map<std::string, std::pair<std::string, std::string>> summaries;
  std::vector<std::string> order;
  fs::path dir = path.parent_path();
  if (!col_inline_summary) {
    fs::path summaries_path =
        options.summaries_path.empty()
            ? first_existing(
                  {dir / "summaries.csv", dir / "third_party" / "wikipedia" / "summaries.csv"})
            : options.summaries_path;
    if (summaries_path.empty())
      fail(path, "",
           "no \"summary\" column and no summaries.csv beside it or in third_party/wikipedia/");
    CsvTable table = read_csv(summaries_path);
    std::size_t s_doc = table.require("document_id");
    std::size_t s_summary = table.require("summary");
    for (const CsvRecord& row : table.rows) {
      const std::string& id = row.fields[s_doc];
      if (id.empty()) fail(table.path, "line " + std::to_string(row.line), "empty document_id");
      if (summaries.emplace(id, std::pair{std::string(), row.fields[s_summary]}).second)
        order.push_back(id);
    }
  }
  report(options, 0.5, "reading questions");
  CorpusData data;
  std::map<std::string, int> per_document;
  for (const CsvRecord& row : qaps.rows) {
    std::string where = "line " + std::to_string(row.line);
    const std::string& doc_id = row.fields[col_doc];
    if (doc_id.empty()) fail(path, where, "empty document_id");
    if (col_inline_summary) {
      if (summaries.emplace(doc_id, std::pair{std::string(), row.fields[*col_inline_summary]})
              .second)
        order.push_back(doc_id);
    } else if (!summaries.count(doc_id)) {
      fail(path, where, "no summary for document_id " + doc_id);
    }
    Question q;
    q.id = doc_id + ":" + std::to_string(++per_document[doc_id]);
    q.question = std::string(trim(row.fields[col_question]));
    if (q.question.empty()) fail(path, where, "empty question");
    add_unique(q.answers, std::string(trim(row.fields[col_answer1])));
    if (col_answer2) add_unique(q.answers, std::string(trim(row.fields[*col_answer2])));
    if (q.answers.empty()) fail(path, where, "no answer");
    q.doc_ids.push_back(doc_id);
    q.kind = "summary";
    data.questions.push_back(std::move(q));
  }
  // Titles from documents.csv when it is there.
  if (fs::path documents = first_existing({dir / "documents.csv"}); !documents.empty()) {
    CsvTable table = read_csv(documents);
    auto d_doc = table.column("document_id");
    auto d_title = table.column("wiki_title");
    if (d_doc && d_title)
      for (const CsvRecord& row : table.rows)
        if (auto it = summaries.find(row.fields[*d_doc]); it != summaries.end())
          it->second.first = row.fields[*d_title];
  }
  for (const std::string& id : order) {
    auto& [title, summary] = summaries[id];
    Document doc;
    doc.id = id;
    doc.title = title.empty() ? id : title;
    doc.text = std::string(trim(summary));
    if (doc.text.empty()) continue;
    data.documents.push_back(std::move(doc));
  }
  report(options, 1.0, "loaded");
  return data;
}

CorpusData load_jsonl(const fs::path& path, const LoadOptions& options) {
  fs::path documents_path = path;
  fs::path questions_path = options.questions_path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    documents_path =
        first_existing({path / "passages.jsonl", path / "documents.jsonl", path / "corpus.jsonl"});
    if (documents_path.empty())
      fail(path, "", "directory holds no passages.jsonl or documents.jsonl");
    if (questions_path.empty()) questions_path = first_existing({path / "questions.jsonl"});
  }

  CorpusData data;
  std::map<std::string, std::size_t> doc_line;                    // id -> line it was defined on
  std::vector<std::pair<fs::path, std::size_t>> question_origin;  // for unknown-id errors

  auto read_one = [&](const fs::path& file, double from, double to) {
    const std::string text = read_file(file);
    LoadOptions scaled = options;
    if (options.progress)
      scaled.progress = [&](double f, std::string_view what) {
        options.progress(from + (to - from) * f, what);
      };
    for_each_json_line(file, text, scaled, [&](std::size_t line, const json& object) {
      std::string where = "line " + std::to_string(line);
      if (object.contains("question")) {
        Question q;
        q.question = string_field(object, "question", file, where, true);
        q.id = id_field(object, "id").value_or("q" + std::to_string(data.questions.size() + 1));
        if (object.contains("answers"))
          q.answers = string_list(object["answers"], "answers", file, where);
        else if (object.contains("answer"))
          q.answers.push_back(string_field(object, "answer", file, where, true));
        if (q.answers.empty()) fail(file, where, "question has no \"answers\"");
        if (object.contains("doc_ids"))
          q.doc_ids = string_list(object["doc_ids"], "doc_ids", file, where);
        q.kind = string_field(object, "kind", file, where, false);
        data.questions.push_back(std::move(q));
        question_origin.emplace_back(file, line);
        return;
      }
      if (!object.contains("text") && !object.contains("contents"))
        fail(file, where,
             "expected a document {\"id\",\"title\",\"text\"} or a question "
             "{\"question\",\"answers\",\"doc_ids\"}");
      Document doc;
      auto id = id_field(object, "id");
      if (!id || id->empty()) fail(file, where, "document has no \"id\" (string or integer)");
      doc.id = *id;
      doc.title = string_field(object, "title", file, where, false);
      doc.text =
          string_field(object, object.contains("text") ? "text" : "contents", file, where, true);
      if (auto [it, fresh] = doc_line.emplace(doc.id, line); !fresh)
        fail(file, where,
             "duplicate document id \"" + doc.id + "\" (first on line " +
                 std::to_string(it->second) + ")");
      data.documents.push_back(std::move(doc));
    });
  };
  read_one(documents_path, 0.0, questions_path.empty() ? 1.0 : 0.8);
  if (!questions_path.empty()) read_one(questions_path, 0.8, 1.0);
  for (std::size_t i = 0; i < data.questions.size(); ++i)
    for (const std::string& id : data.questions[i].doc_ids)
      if (!doc_line.count(id))
        fail(question_origin[i].first, "line " + std::to_string(question_origin[i].second),
             "question names unknown document id \"" + id + "\"");
  report(options, 1.0, "loaded");
  return data;
}

CorpusData load_corpus(const fs::path& path, CorpusFormat format, const LoadOptions& options) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(path.string() + ": no such file or directory");
  switch (format) {
    case CorpusFormat::hotpotqa:
      return load_hotpotqa(path, options);
    case CorpusFormat::two_wiki:
      return load_2wiki(path, options);
    case CorpusFormat::triviaqa:
      return load_triviaqa(path, options);
    case CorpusFormat::narrativeqa:
      return load_narrativeqa(path, options);
    case CorpusFormat::jsonl:
      return load_jsonl(path, options);
  }
  throw Error("unknown corpus format");
}

}  // namespace lazyscope::corpora
