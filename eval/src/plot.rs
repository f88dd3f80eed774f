//! SVG charts of a run: the Pareto front of token reduction against recall, recall per
//! question category, and a reader's scores against the tokens each question cost.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use crate::answers::AnswerRun;
use crate::report::Run;
use crate::Mode;

const COLORS: &[RGBColor] = &[
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("drawing a chart: {e}")
}

/// Token reduction (x) against evidence recall (left) and answer recall (right), one point per
/// strategy and budget, points of a strategy joined in budget order.
pub fn pareto(path: &Path, dataset: &str, mode: Mode, runs: &[&Run], strategies: &[String]) -> Result<()> {
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let panels = root.split_evenly((1, 2));
    for (panel, (label, metric)) in panels.iter().zip([
        ("evidence recall", (|r: &Run| r.evidence_recall) as fn(&Run) -> f64),
        ("answer recall", |r: &Run| r.answer_recall),
    ]) {
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{dataset} ({}): {label} vs token reduction", mode.as_str()), ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d(0f64..1f64, 0f64..1.05f64)
            .map_err(err)?;
        chart.configure_mesh().x_desc("token reduction").y_desc(label).draw().map_err(err)?;
        for (i, s) in strategies.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let mut points: Vec<(f64, f64, usize)> =
                runs.iter().filter(|r| &r.strategy == s).map(|r| (r.token_reduction, metric(r), r.budget)).collect();
            points.sort_by_key(|p| p.2);
            if points.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(points.iter().map(|p| (p.0, p.1)), color.stroke_width(2)))
                .map_err(err)?
                .label(s.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], color.filled()));
            chart.draw_series(points.iter().map(|p| Circle::new((p.0, p.1), 4, color.filled()))).map_err(err)?;
            chart
                .draw_series(
                    points.iter().map(|p| {
                        Text::new(format!("{}", p.2), (p.0, p.1), ("sans-serif", 11).into_font().color(&color))
                    }),
                )
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Evidence recall per question category at one budget: a group of bars per category, one bar
/// per strategy.
pub fn categories(
    path: &Path,
    dataset: &str,
    budget: usize,
    mode: Mode,
    runs: &[&Run],
    strategies: &[String],
) -> Result<()> {
    let runs: Vec<&&Run> = runs.iter().filter(|r| r.budget == budget).collect();
    let mut cats: Vec<String> = runs.iter().flat_map(|r| r.by_category.keys().cloned()).collect();
    cats.sort();
    cats.dedup();
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let n = strategies.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{dataset} ({}), budget {budget}: evidence recall by category", mode.as_str()),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(44)
        .build_cartesian_2d(0f64..cats.len().max(1) as f64, 0f64..1.3f64)
        .map_err(err)?;
    let labels = cats.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(cats.len() * 2 + 1)
        .x_label_formatter(&move |x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.26 {
                labels.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("evidence recall")
        .draw()
        .map_err(err)?;
    for (si, s) in strategies.iter().enumerate() {
        let color = COLORS[si % COLORS.len()];
        let Some(run) = runs.iter().find(|r| &r.strategy == s) else {
            continue;
        };
        let bars: Vec<Rectangle<(f64, f64)>> = cats
            .iter()
            .enumerate()
            .filter_map(|(ci, c)| {
                let v = run.by_category.get(c)?.evidence_recall;
                let x0 = ci as f64 + 0.1 + 0.8 * si as f64 / n;
                Some(Rectangle::new([(x0, 0.0), (x0 + 0.8 / n, v)], color.filled()))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(s.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// A reader's F1 (left) and, with a judge, its accuracy (right) against the mean context
/// tokens per question (log scale), one series per strategy and mode, points joined in budget
/// order and labelled with it: what each token buys in answers.
pub fn answers(path: &Path, dataset: &str, runs: &[&AnswerRun]) -> Result<()> {
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let max_tokens = runs.iter().map(|r| r.context_tokens).fold(1.0f64, f64::max) * 1.5;
    let mut series: Vec<(String, Mode)> = runs.iter().map(|r| (r.strategy.clone(), r.mode)).collect();
    series.dedup();
    series.sort();
    series.dedup();
    let judged = runs.iter().any(|r| r.scores.judge.is_some());
    let panels = root.split_evenly((1, 2));
    type Metric = fn(&AnswerRun) -> Option<f64>;
    let metrics: [(&str, Metric); 2] = [("F1", |r| Some(r.scores.f1)), ("judge", |r| r.scores.judge)];
    for (panel, (label, metric)) in panels.iter().zip(metrics) {
        if label == "judge" && !judged {
            continue;
        }
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{dataset}: reader {label} vs context tokens per question"), ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d((50f64..max_tokens).log_scale(), 0f64..1.05f64)
            .map_err(err)?;
        chart.configure_mesh().x_desc("context tokens per question").y_desc(label).draw().map_err(err)?;
        for (i, (strategy, mode)) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let mut points: Vec<(f64, f64, usize)> = runs
                .iter()
                .filter(|r| &r.strategy == strategy && r.mode == *mode)
                .filter_map(|r| Some((r.context_tokens.max(50.0), metric(r)?, r.budget)))
                .collect();
            points.sort_by_key(|p| p.2);
            if points.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(points.iter().map(|p| (p.0, p.1)), color.stroke_width(2)))
                .map_err(err)?
                .label(format!("{strategy} ({})", mode.as_str()))
                .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], color.filled()));
            chart.draw_series(points.iter().map(|p| Circle::new((p.0, p.1), 4, color.filled()))).map_err(err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}
