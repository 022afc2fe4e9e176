//! `plot.png` beside `plot.svg`: the SVG rasterised with resvg (pure Rust), for READMEs, slides
//! and viewers without SVG support.
//!
//! Text needs fonts: the system's are loaded once per process. Without any (a bare container),
//! the PNG has no text but is still written; the SVG is the reference either way.

use std::sync::{Arc, OnceLock};

use resvg::{tiny_skia, usvg};

/// Pixels per SVG unit: 2× for sharp text on high-density screens and in print.
const SCALE: f32 = 2.0;

fn fonts() -> Arc<usvg::fontdb::Database> {
    static FONTS: OnceLock<Arc<usvg::fontdb::Database>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let mut db = usvg::fontdb::Database::new();
            db.load_system_fonts();
            // The SVG asks for the generic "sans-serif", which fontdb maps to Arial; point it at
            // a sans face that is installed (the first of these, else any face at all).
            let families: Vec<String> =
                db.faces().flat_map(|f| f.families.iter().map(|x| x.0.clone())).collect();
            let preferred = ["Liberation Sans", "DejaVu Sans", "Noto Sans", "Arial", "Helvetica"];
            let pick = preferred
                .iter()
                .map(|p| p.to_string())
                .find(|p| families.contains(p))
                .or_else(|| families.first().cloned());
            if let Some(family) = pick {
                db.set_sans_serif_family(family);
            }
            Arc::new(db)
        })
        .clone()
}

/// Renders SVG text to PNG bytes (white background).
pub fn svg_to_png(svg: &str) -> Result<Vec<u8>, String> {
    let options = usvg::Options { fontdb: fonts(), ..usvg::Options::default() };
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| format!("cannot parse the SVG: {e}"))?;
    let size = tree.size();
    let (width, height) = ((size.width() * SCALE).ceil() as u32, (size.height() * SCALE).ceil() as u32);
    let mut pixmap = tiny_skia::Pixmap::new(width.max(1), height.max(1))
        .ok_or_else(|| format!("cannot make a {width}x{height} image"))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::from_scale(SCALE, SCALE), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| format!("cannot encode the PNG: {e}"))
}

#[cfg(test)]
mod tests {
    use super::svg_to_png;

    #[test]
    fn a_plot_becomes_a_png_of_twice_its_size() {
        let svg = r#"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30"><rect x="5" y="5" width="10" height="10" fill="red"/><text x="2" y="28" font-family="sans-serif">x</text></svg>"#;
        let png = svg_to_png(svg).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        // IHDR: width and height, big-endian, at bytes 16..24.
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 80);
        assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 60);
        assert!(svg_to_png("not svg").is_err());
    }
}
