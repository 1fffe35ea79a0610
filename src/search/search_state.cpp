// A skip-set search's state on disk: see search_state.hpp.
#include "search/search_state.hpp"

#include "core/error.hpp"
#include "core/text_file_output.hpp"

#include <fstream>
#include <sstream>

namespace selfspec {

namespace {

constexpr int kStateVersion = 1;

std::string mask_string(const BinaryMask& mask) {
  std::string s;
  for (std::uint8_t b : mask) s.push_back(b != 0 ? '1' : '0');
  return s;
}

BinaryMask parse_mask(const std::string& text, const std::string& what) {
  BinaryMask mask;
  for (char c : text) {
    SELFSPEC_CHECK(c == '0' || c == '1', "{}: mask '{}' holds '{}' (expected 0 or 1)", what, text,
                   c);
    mask.push_back(static_cast<std::uint8_t>(c - '0'));
  }
  return mask;
}

}  // namespace

nlohmann::json SearchEvaluation::to_json() const {
  return {{"iteration", iteration},
          {"phase", phase},
          {"mask", mask_string(mask)},
          {"attention", attention},
          {"mlp", mlp},
          {"skipped", attention.size() + mlp.size()},
          {"matches", matches},
          {"positions", positions},
          {"alpha", alpha},
          {"cost", cost},
          {"draft_length", draft_length},
          {"tokens_per_round", tokens_per_round},
          {"objective", objective},
          {"eq6", eq6},
          {"seconds", seconds}};
}

SearchEvaluation SearchEvaluation::from_json(const nlohmann::json& json, const std::string& what) {
  SearchEvaluation e;
  try {
    e.iteration = json.at("iteration").get<int>();
    e.phase = json.at("phase").get<std::string>();
    e.mask = parse_mask(json.at("mask").get<std::string>(), what);
    e.attention = json.at("attention").get<std::vector<int>>();
    e.mlp = json.at("mlp").get<std::vector<int>>();
    e.matches = json.at("matches").get<std::int64_t>();
    e.positions = json.at("positions").get<std::int64_t>();
    e.alpha = json.at("alpha").get<double>();
    e.cost = json.at("cost").get<double>();
    e.draft_length = json.at("draft_length").get<int>();
    e.tokens_per_round = json.at("tokens_per_round").get<double>();
    e.objective = json.at("objective").get<double>();
    e.eq6 = json.at("eq6").get<double>();
    e.seconds = json.value("seconds", 0.0);
  } catch (const nlohmann::json::exception& error) {
    fail("{}: evaluation record: {}", what, error.what());
  }
  return e;
}

nlohmann::json SearchState::to_json() const {
  nlohmann::json out;
  out["version"] = kStateVersion;
  out["settings"] = settings;
  out["cost_table"] = cost_table.to_json();
  out["evaluations"] = nlohmann::json::array();
  for (const SearchEvaluation& e : evaluations) out["evaluations"].push_back(e.to_json());
  return out;
}

void save_search_state(const std::filesystem::path& path, const SearchState& state) {
  write_text_file_atomically(path, state.to_json().dump(1) + "\n", "search state");
}

SearchState load_search_state(const std::filesystem::path& path) {
  const std::string what = path.string();
  std::ifstream in(path);
  SELFSPEC_CHECK(in.good(), "cannot read the search state {}", what);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& error) {
    fail("{}: not a search state (invalid JSON: {})", what, error.what());
  }
  SELFSPEC_CHECK(json.is_object() && json.value("version", 0) == kStateVersion,
                 "{}: not a search state of version {}", what, kStateVersion);
  SELFSPEC_CHECK(json.contains("settings") && json.contains("cost_table") &&
                     json.contains("evaluations") && json["evaluations"].is_array(),
                 "{}: a search state needs 'settings', 'cost_table' and 'evaluations'", what);
  SearchState state;
  state.settings = json["settings"];
  state.cost_table = SublayerCostTable::from_json(json["cost_table"], what);
  for (std::size_t i = 0; i < json["evaluations"].size(); ++i) {
    state.evaluations.push_back(SearchEvaluation::from_json(
        json["evaluations"][i], what + ": evaluations[" + std::to_string(i) + "]"));
    SELFSPEC_CHECK(state.evaluations.back().iteration == static_cast<int>(i),
                   "{}: evaluations[{}] has iteration {}", what, i,
                   state.evaluations.back().iteration);
  }
  return state;
}

std::size_t best_evaluation(const std::vector<SearchEvaluation>& evaluations) {
  SELFSPEC_CHECK(!evaluations.empty(), "the search has no evaluation yet");
  std::size_t best = 0;
  for (std::size_t i = 1; i < evaluations.size(); ++i) {
    if (evaluations[i].objective > evaluations[best].objective) best = i;
  }
  return best;
}

}  // namespace selfspec
