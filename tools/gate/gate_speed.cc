#include "tools/gate/gate_speed.h"

#include "fmt/format.h"

namespace mxdiff::gate {
namespace {

std::string Describe(const ProtocolFigures& f, std::string_view a, std::string_view b) {
  return fmt::format("{} {:.3f}, {} {:.3f}, B-A {:+.3f} us [{:+.3f}, {:+.3f}] ({:+.1f}%)", a, f.a_us, b, f.b_us,
                     f.difference_us, f.ci_low_us, f.ci_high_us, f.a_us > 0 ? 100 * f.difference_us / f.a_us : 0.0);
}

std::string DetailOf(const SpeedMeasurement& m) {
  const bench::ShapeReport& r = m.report;
  const std::optional<ProtocolFigures> sound = FiguresOf(r, bench::Protocol::kSound);
  const std::optional<ProtocolFigures> naive = FiguresOf(r, bench::Protocol::kNaive);
  std::string a = "A", b = "B";
  for (const bench::ExperimentReport& e : r.experiments) {
    if (e.protocol == bench::Protocol::kSound) a = e.a.label, b = e.b.label;
  }
  std::string line = fmt::format("{} ({}{}): sound: {}: {}: {}", m.name, m.layer ? "whole layer, us per layer" : "us per call",
                                 m.candidate_runs ? "" : ", folded runs nowhere here on this rank",
                                 sound ? Describe(*sound, a, b) : "no figures", bench::VerdictName(r.verdict.verdict),
                                 !r.error.empty() ? r.error : r.verdict.message);
  line += naive ? fmt::format("; naive protocol beside it: {}: it would say {}", Describe(*naive, a, b), AnswerOf(*naive))
                : "; naive protocol: no figures";
  return line;
}

ProtocolFigures Scaled(const ProtocolFigures& f, double factor) {
  return {f.a_us * factor, f.b_us * factor, f.difference_us * factor, f.ci_low_us * factor, f.ci_high_us * factor};
}

}  // namespace

std::optional<ProtocolFigures> FiguresOf(const bench::ShapeReport& shape, bench::Protocol protocol) {
  for (const bench::ExperimentReport& e : shape.experiments) {
    if (e.protocol != protocol || !e.has_analysis()) continue;
    const bench::Analysis& a = e.result.analysis;
    return ProtocolFigures{a.a.median, a.b.median, a.difference.estimate, a.difference.ci.low, a.difference.ci.high};
  }
  return std::nullopt;
}

std::string_view AnswerOf(const ProtocolFigures& figures) {
  if (figures.ci_high_us < 0) return "faster";
  if (figures.ci_low_us > 0) return "slower";
  return "no difference";
}

SpeedDecision DecideSpeed(std::span<const SpeedMeasurement> measurements, SpeedUnit unit) {
  SpeedDecision decision;
  std::vector<std::string> failed, undecided, faster;
  int candidate_layers = 0;
  const std::string_view unit_name = unit == SpeedUnit::kLayer ? "the whole layer" : "the GEMM";
  for (const SpeedMeasurement& m : measurements) {
    const bool counts = unit == SpeedUnit::kLayer ? m.layer : !m.layer;
    decision.details.push_back(DetailOf(m));
    const bench::Verdict v = m.report.error.empty() ? m.report.verdict.verdict : bench::Verdict::kIncomplete;
    const std::string why = fmt::format("{} {}", m.name, bench::VerdictName(v));
    if (v == bench::Verdict::kSlower || v == bench::Verdict::kBitMismatch) {
      failed.push_back(why);
    } else if (v == bench::Verdict::kTooNoisy || v == bench::Verdict::kPositionEffect || v == bench::Verdict::kIncomplete) {
      undecided.push_back(why);
    } else if (counts && m.candidate_runs && v != bench::Verdict::kFaster) {
      undecided.push_back(fmt::format("{} ({} not resolved faster)", why, unit_name));
    } else if (v == bench::Verdict::kFaster) {
      faster.push_back(m.name);
    }
    candidate_layers += counts && m.candidate_runs ? 1 : 0;
  }
  if (!failed.empty()) {
    decision.outcome = StepOutcome::kFailed;
    decision.summary = fmt::format("the sound protocol says the candidate is slower (or a bit differs): {}",
                                   fmt::join(failed, "; "));
  } else if (candidate_layers == 0) {
    decision.summary = unit == SpeedUnit::kLayer ? "no whole layer was timed with the candidate running: no verdict"
                                                 : "no GEMM was timed with the candidate running: no verdict";
  } else if (!undecided.empty()) {
    decision.summary = fmt::format("no verdict: {}", fmt::join(undecided, "; "));
  } else {
    decision.outcome = StepOutcome::kPassed;
    decision.summary =
        unit == SpeedUnit::kLayer
            ? fmt::format("the candidate is faster on the whole layer of {} layer(s), every control passing (faster: "
                          "{}; nothing slower)", candidate_layers, fmt::join(faster, ", "))
            : fmt::format("the candidate is faster on each of {} timed GEMM(s), every control passing (faster: {}; "
                          "nothing slower)", candidate_layers, fmt::join(faster, ", "));
  }
  return decision;
}

std::optional<PerToken> ModelPerToken(std::span<const SpeedMeasurement> measurements, size_t moe_layers) {
  PerToken t{.moe_layers = moe_layers};
  bool naive = true;
  ProtocolFigures naive_sum;
  for (const SpeedMeasurement& m : measurements) {
    if (!m.layer) continue;
    const std::optional<ProtocolFigures> s = FiguresOf(m.report, bench::Protocol::kSound);
    const std::optional<ProtocolFigures> n = FiguresOf(m.report, bench::Protocol::kNaive);
    if (!s) return std::nullopt;
    if (t.measured_layers == 0) {
      t.projection = Scaled(*s, double(moe_layers));
      if (n) t.naive_projection = Scaled(*n, double(moe_layers));
    }
    ++t.measured_layers;
    t.sound.a_us += s->a_us;
    t.sound.b_us += s->b_us;
    naive &= n.has_value();
    if (n) naive_sum.a_us += n->a_us, naive_sum.b_us += n->b_us;
  }
  if (t.measured_layers == 0) return std::nullopt;
  t.sound.difference_us = t.sound.b_us - t.sound.a_us;
  t.sound.ci_low_us = t.sound.ci_high_us = t.sound.difference_us;  // a sum of medians: no interval
  if (naive) {
    naive_sum.difference_us = naive_sum.ci_low_us = naive_sum.ci_high_us = naive_sum.b_us - naive_sum.a_us;
    t.naive = naive_sum;
  }
  return t;
}

std::string PerTokenLine(const PerToken& t) {
  auto pair = [](const ProtocolFigures& f) {
    return fmt::format("ordinary {:.2f}, candidate {:.2f} ({:+.2f}, {:+.1f}%)", f.a_us, f.b_us, f.b_us - f.a_us,
                       f.a_us > 0 ? 100 * (f.b_us - f.a_us) / f.a_us : 0.0);
  };
  return fmt::format(
      "us per token, the whole layer's graph (sound protocol, medians) summed over the {} measured layer(s) of {}: {}; "
      "the seed's projection (the first layer x {}): {}; the naive protocol (tune on first use) summed: {}; the seed's "
      "method (naive, one layer x {}): {}",
      t.measured_layers, t.moe_layers, pair(t.sound), t.moe_layers, pair(t.projection),
      t.naive ? pair(*t.naive) : "not measured", t.moe_layers,
      t.naive_projection ? pair(*t.naive_projection) : "not measured");
}

}  // namespace mxdiff::gate
