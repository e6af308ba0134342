//! The HTML report in a real browser: index.html of the committed FAST lock-in example
//! (docs/results/fast-lock-in-200s/t0_2), written again into target/html-report/, rendered
//! by headless Chromium over the DevTools protocol (`headless_chrome`). It fails on an image
//! that did not load, on a console or log error, and on a page without its summary tables;
//! the same check on a copy with one plot removed must see that plot broken. The screenshot
//! goes to target/html-report/fast-lock-in-t0_2.png (docs/results/report-screenshot.png is
//! one). Needs Debian's `chromium` (`make deps` installs it); no root, no kernel.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::{Browser, LaunchOptions, Tab};

const CHROMIUM: &str = "/usr/bin/chromium";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// target/html-report/, made fresh.
fn out_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    let d = target.join("html-report");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Copies the files of `from` (not its subdirectories) into a new directory `to`.
fn copy_files(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Headless Chromium that fetches nothing by itself: no sandbox (CI runs as root), a fresh
/// profile under `out`.
fn browser(out: &Path) -> Browser {
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} is missing: `make deps` installs it (Debian package chromium, \
         scripts/install-deps.sh)"
    );
    let args: Vec<&OsStr> = [
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-gpu",
    ]
    .iter()
    .map(OsStr::new)
    .collect();
    let options = LaunchOptions::default_builder()
        .path(Some(PathBuf::from(CHROMIUM)))
        .headless(true)
        .sandbox(false)
        .user_data_dir(Some(out.join("profile")))
        .window_size(Some((1280, 1600)))
        .idle_browser_timeout(Duration::from_secs(120))
        .args(args)
        .build()
        .unwrap();
    Browser::new(options).expect("chromium starts")
}

/// What the page showed: the `src` of every image that did not load, the number of images,
/// of summary tables and of their body rows, and every console, log or script error.
#[derive(Debug)]
struct Seen {
    broken: Vec<String>,
    images: usize,
    tables: usize,
    rows: usize,
    errors: Vec<String>,
}

/// Opens `page` in a new tab of `b` and reads what [`Seen`] holds; `shot` saves a
/// screenshot of the whole page there.
fn open(b: &Browser, page: &Path, shot: Option<&Path>) -> Seen {
    let tab: Arc<Tab> = b.new_tab().unwrap();
    tab.set_default_timeout(Duration::from_secs(60));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let sink = errors.clone();
    tab.add_event_listener(Arc::new(move |e: &Event| {
        let line = match e {
            Event::LogEntryAdded(l) => {
                let entry = &l.params.entry;
                format!("{:?}", entry.level)
                    .eq_ignore_ascii_case("error")
                    .then(|| {
                        format!(
                            "log: {} {}",
                            entry.text,
                            entry.url.clone().unwrap_or_default()
                        )
                    })
            }
            Event::RuntimeConsoleAPICalled(c) => format!("{:?}", c.params.Type)
                .eq_ignore_ascii_case("error")
                .then(|| format!("console.error: {:?}", c.params.args)),
            Event::RuntimeExceptionThrown(x) => {
                Some(format!("exception: {}", x.params.exception_details.text))
            }
            _ => None,
        };
        if let Some(l) = line {
            sink.lock().unwrap().push(l);
        }
    }))
    .unwrap();
    tab.enable_log().unwrap();
    tab.enable_runtime().unwrap();
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    tab.navigate_to(&url)
        .unwrap()
        .wait_until_navigated()
        .unwrap();
    let probe = tab
        .evaluate(
            "JSON.stringify({\
               broken: [...document.images]\
                 .filter(i => !(i.complete && i.naturalWidth > 0))\
                 .map(i => i.getAttribute('src')),\
               images: document.images.length,\
               tables: document.querySelectorAll('table.summary').length,\
               rows: document.querySelectorAll('table.summary tbody tr').length})",
            false,
        )
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(probe.value.unwrap().as_str().unwrap()).unwrap();
    if let Some(path) = shot {
        let png = tab
            .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)
            .unwrap();
        std::fs::write(path, png).unwrap();
    }
    // Log entries of the load arrive as events; give the last of them a moment.
    std::thread::sleep(Duration::from_millis(300));
    let errors = errors.lock().unwrap().clone();
    Seen {
        broken: v["broken"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap_or_default().to_string())
            .collect(),
        images: v["images"].as_u64().unwrap() as usize,
        tables: v["tables"].as_u64().unwrap() as usize,
        rows: v["rows"].as_u64().unwrap() as usize,
        errors,
    }
}

#[test]
fn the_fast_lock_in_report_renders_with_every_plot_and_its_tables_in_chromium() {
    let out = out_dir();
    let dir = out.join("fast-lock-in-t0_2");
    copy_files(&repo().join("docs/results/fast-lock-in-200s/t0_2"), &dir);
    let (s, page) = cctl_report::html::write_from_summary(&dir).unwrap();
    let plots = cctl_report::html::plot_files(&dir).unwrap();
    assert_eq!(plots.len(), 3, "{plots:?}");
    let b = browser(&out);

    let shot = out.join("fast-lock-in-t0_2.png");
    let seen = open(&b, &page, Some(&shot));
    assert!(
        seen.broken.is_empty(),
        "images that did not load: {:?}",
        seen.broken
    );
    assert_eq!(seen.images, plots.len(), "{seen:?}");
    assert!(
        seen.errors.is_empty(),
        "errors in the page: {:?}",
        seen.errors
    );
    assert!(seen.tables > 5, "summary tables: {seen:?}");
    let points = s
        .rows
        .iter()
        .map(|r| r.point)
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(
        seen.rows,
        seen.tables * points.len(),
        "a row per point in each table"
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );

    // The check sees a plot that is gone.
    let gone = &plots[0].image;
    std::fs::remove_file(dir.join(gone)).unwrap();
    let seen = open(&b, &page, None);
    assert_eq!(seen.broken, std::slice::from_ref(gone), "{seen:?}");
    assert_eq!(seen.images, plots.len());
}
