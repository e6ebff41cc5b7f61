#include "corpora/chunking.h"

#include <cctype>
#include <map>

namespace lazyscope::corpora {
namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    std::size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

// A sentence ends after '.', '!' or '?' (optionally followed by closing quotes/brackets)
// that is followed by whitespace.
std::vector<std::string_view> split_sentences(std::string_view text) {
  std::vector<std::string_view> sentences;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c != '.' && c != '!' && c != '?') continue;
    std::size_t end = i + 1;
    while (end < text.size() && (text[end] == '"' || text[end] == '\'' || text[end] == ')')) ++end;
    if (end < text.size() && !is_space(text[end])) continue;
    sentences.push_back(text.substr(start, end - start));
    start = end;
    i = end;
  }
  if (start < text.size()) sentences.push_back(text.substr(start));
  std::vector<std::string_view> trimmed;
  for (auto s : sentences) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    if (!s.empty()) trimmed.push_back(s);
  }
  return trimmed;
}

struct Unit {
  std::string_view text;
  std::size_t tokens;
};

std::string join(const std::vector<Unit>& units, std::size_t begin, std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end; ++i) {
    if (!out.empty()) out.push_back(' ');
    out.append(units[i].text);
  }
  return out;
}

}  // namespace

std::size_t count_words(std::string_view text) { return split_words(text).size(); }

std::vector<std::string> chunk_text(std::string_view text, const ChunkOptions& options) {
  const TokenCountFn count =
      options.count_tokens ? options.count_tokens : TokenCountFn(count_words);
  if (options.max_tokens == 0 || count(text) <= options.max_tokens) {
    return text.empty() ? std::vector<std::string>{} : std::vector<std::string>{std::string(text)};
  }
  // Units are sentences; a sentence longer than a chunk is broken into words.
  std::vector<Unit> units;
  for (std::string_view sentence : split_sentences(text)) {
    std::size_t tokens = count(sentence);
    if (tokens <= options.max_tokens) {
      units.push_back({sentence, tokens});
      continue;
    }
    for (std::string_view word : split_words(sentence))
      units.push_back({word, std::max<std::size_t>(1, count(word))});
  }
  std::size_t overlap = std::min(options.overlap_tokens, options.max_tokens / 2);
  std::vector<std::string> chunks;
  std::size_t begin = 0;
  while (begin < units.size()) {
    std::size_t end = begin;
    std::size_t tokens = 0;
    // Always take at least one unit so a single oversized word still makes progress.
    while (end < units.size() &&
           (end == begin || tokens + units[end].tokens <= options.max_tokens)) {
      tokens += units[end].tokens;
      ++end;
    }
    chunks.push_back(join(units, begin, end));
    if (end >= units.size()) break;
    // Step back over whole units worth at most `overlap` tokens, but always advance.
    std::size_t next = end;
    std::size_t carried = 0;
    while (next > begin + 1 && carried + units[next - 1].tokens <= overlap) {
      carried += units[next - 1].tokens;
      --next;
    }
    begin = next;
  }
  return chunks;
}

void chunk_corpus(CorpusData& data, const ChunkOptions& options) {
  if (options.max_tokens == 0) return;
  std::vector<Document> out;
  out.reserve(data.documents.size());
  std::map<std::string, std::vector<std::size_t>> chunks_of;  // parent id -> indices in `out`
  for (Document& doc : data.documents) {
    std::vector<std::string> pieces = chunk_text(doc.text, options);
    if (pieces.size() <= 1) {
      out.push_back(std::move(doc));
      continue;
    }
    auto& indices = chunks_of[doc.id];
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      Document chunk;
      chunk.id = doc.id + "#" + std::to_string(i + 1);
      chunk.title = doc.title;
      chunk.text = std::move(pieces[i]);
      chunk.parent_id = doc.id;
      chunk.popularity = doc.popularity;
      indices.push_back(out.size());
      out.push_back(std::move(chunk));
    }
  }
  data.documents = std::move(out);
  if (chunks_of.empty()) return;
  for (Question& q : data.questions) {
    std::vector<std::string> gold;
    for (const std::string& id : q.doc_ids) {
      auto it = chunks_of.find(id);
      if (it == chunks_of.end()) {
        gold.push_back(id);
        continue;
      }
      std::vector<std::string> with_answer;
      for (std::size_t index : it->second) {
        const Document& chunk = data.documents[index];
        for (const std::string& answer : q.answers) {
          if (!answer.empty() && chunk.text.find(answer) != std::string::npos) {
            with_answer.push_back(chunk.id);
            break;
          }
        }
      }
      if (with_answer.empty()) {
        for (std::size_t index : it->second) with_answer.push_back(data.documents[index].id);
      }
      gold.insert(gold.end(), with_answer.begin(), with_answer.end());
    }
    q.doc_ids = std::move(gold);
  }
}

}  // namespace lazyscope::corpora
