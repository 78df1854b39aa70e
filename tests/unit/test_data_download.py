"""Downloads: resumable HTTP from a local server, checksums, extraction, mirrors, offline errors."""

import gzip
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from corpora import tar_bytes
from shared_data import SHARED_DATA

from transformer_core.data.fetch import Fetcher, Unavailable, http_download
from transformer_core.data.registry import load_registry, parse_registry
from transformer_core.data.sources import build_dataset, read_sentences
from transformer_core.errors import ConfigError, UserError


class FileServer:
    """An HTTP server on 127.0.0.1 serving ``files`` (name -> bytes), with Range support.

    ``cut[name] = n`` makes the next full response for ``name`` stop after n bytes
    (announcing the full length), as a dropped connection does.
    """

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.cut: dict[str, int] = {}
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                name = self.path.lstrip("/")
                server.requests.append((name, self.headers.get("Range")))
                if name not in server.files:
                    self.send_error(404)
                    return
                data = server.files[name]
                start = 0
                if self.headers.get("Range"):
                    start = int(self.headers["Range"].split("=")[1].rstrip("-"))
                    if start >= len(data):
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if start == 0 and name in server.cut:
                    self.wfile.write(body[: server.cut.pop(name)])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = FileServer()
    yield s
    s.close()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def payload(n=300_000):
    return bytes((i * 7 + i // 251) % 256 for i in range(n))


def test_download_cut_off_mid_transfer_resumes_with_range(server, tmp_path):
    data = payload()
    server.files["big.bin"] = data
    server.cut["big.bin"] = 100_000
    part = tmp_path / "big.bin.part"
    http_download(f"{server.url}/big.bin", part, retries=2)
    assert part.read_bytes() == data
    assert server.requests == [("big.bin", None), ("big.bin", "bytes=100000-")]


def test_interrupted_download_resumes_in_a_later_run(server, tmp_path):
    data = payload()
    server.files["big.bin"] = data
    server.cut["big.bin"] = 120_000
    registry = parse_registry(
        {
            "files": {"big.bin": {"url": f"{server.url}/big.bin", "sha256": sha256(data)}},
            "datasets": {},
        }
    )
    entry = registry.files["big.bin"]
    with pytest.raises(Unavailable, match="run again to resume"):
        Fetcher(tmp_path, retries=0).fetch(entry)
    assert (tmp_path / "big.bin.part").stat().st_size == 120_000
    path = Fetcher(tmp_path, retries=0).fetch(entry)  # the next run picks up the .part file
    assert path == tmp_path / "big.bin" and path.read_bytes() == data
    assert server.requests[-1] == ("big.bin", "bytes=120000-")
    assert not (tmp_path / "big.bin.part").exists()


SGM_SRC = (
    '<srcset setid="newstest2014" srclang="any">\n<doc sysid="ref" docid="1" origlang="en">\n'
    '<seg id="1">Hello  world.</seg>\n<seg id="2"> Second line </seg>\n</doc>\n</srcset>\n'
)
SGM_REF = SGM_SRC.replace("Hello  world.", "Hallo Welt.").replace("Second line", "Zweite Zeile")


def toy_registry(url_base: str, archive: bytes, corpus_gz: bytes, archive_sha=None) -> dict:
    return {
        "files": {
            "toy.tgz": {"url": f"{url_base}/toy.tgz", "sha256": archive_sha or sha256(archive)},
            "plain.en.gz": {"url": f"{url_base}/plain.en.gz", "mirror_dirs": ["sub"]},
            "plain.de.gz": {"url": f"{url_base}/plain.de.gz", "mirror_dirs": ["sub"]},
            "only-mirror.en": {"sha256": sha256(b"mirror line\n"), "mirror_dirs": ["sub"]},
            "only-mirror.de": {"mirror_dirs": ["sub"]},
        },
        "datasets": {
            "toy_en_de": {
                "src": "en",
                "tgt": "de",
                "splits": {
                    "train": [
                        {
                            "name": "archive-part",
                            "from": [
                                {
                                    "src": {"file": "toy.tgz", "member": "train/c.en"},
                                    "tgt": {"file": "toy.tgz", "member": "train/c.de.gz"},
                                }
                            ],
                        },
                        {
                            "name": "gz-part",
                            "from": [
                                {"src": {"file": "plain.en.gz"}, "tgt": {"file": "plain.de.gz"}}
                            ],
                        },
                    ],
                    "dev": [
                        {
                            "name": "dev",
                            "lines": 1,
                            "from": [
                                {
                                    "src": {"file": "only-mirror.en"},
                                    "tgt": {"file": "only-mirror.de"},
                                },
                                {
                                    "src": {"file": "toy.tgz", "member": "dev/d.en"},
                                    "tgt": {"file": "toy.tgz", "member": "dev/d.de"},
                                },
                            ],
                        }
                    ],
                    "test": [
                        {
                            "name": "test-sgm",
                            "lines": 2,
                            "from": [
                                {
                                    "src": {
                                        "file": "toy.tgz",
                                        "member": "t/src.en.sgm",
                                        "format": "sgm",
                                    },
                                    "tgt": {
                                        "file": "toy.tgz",
                                        "member": "t/ref.de.sgm",
                                        "format": "sgm",
                                    },
                                }
                            ],
                        }
                    ],
                },
            }
        },
    }


@pytest.fixture
def toy(server):
    archive = tar_bytes(
        {
            "train/c.en": b"one\r\ntwo\xe2\x80\xa8half\nthree\n",
            "train/c.de.gz": gzip.compress(b"eins\nzwei\ndrei\n"),
            "dev/d.en": b"dev line\n",
            "dev/d.de": b"Dev Zeile\n",
            "t/src.en.sgm": SGM_SRC.encode(),
            "t/ref.de.sgm": SGM_REF.encode(),
            "other/unused.txt": b"x\n",
        }
    )
    server.files["toy.tgz"] = archive
    server.files["plain.en.gz"] = gzip.compress(b"four\n")
    server.files["plain.de.gz"] = gzip.compress(b"vier\n")
    return archive


def test_build_dataset_over_http(server, toy, tmp_path):
    registry = parse_registry(toy_registry(server.url, toy, b""))
    fetcher = Fetcher(tmp_path / "cache")
    out = tmp_path / "out"
    manifest = build_dataset(
        registry.dataset("toy_en_de"), registry, fetcher, out, ["train", "dev", "test"]
    )
    # \r\n and U+2028 never split a sentence: lines stay aligned
    assert (out / "train.en").read_text() == "one\ntwo half\nthree\nfour\n"
    assert (out / "train.de").read_text() == "eins\nzwei\ndrei\nvier\n"
    assert (out / "dev.en").read_text() == "dev line\n"  # no mirror: the archive alternative
    assert (out / "test.en").read_text() == "Hello world.\nSecond line\n"
    assert (out / "test.de").read_text() == "Hallo Welt.\nZweite Zeile\n"
    assert manifest["lines"] == {"train": 4, "dev": 1, "test": 2}
    assert json.loads((out / "manifest.json").read_text())["lines"] == manifest["lines"]
    assert manifest["files"]["toy.tgz"]["checksum_verified"] is True
    assert manifest["files"]["plain.en.gz"]["sha256"] == sha256(server.files["plain.en.gz"])
    assert not list((tmp_path / "cache" / "extracted").rglob("unused.txt"))  # only needed members


def test_local_mirror_preferred_and_its_subfolders_searched(server, toy, tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "sub").mkdir(parents=True)
    (mirror / "sub" / "only-mirror.en").write_bytes(b"mirror line\n")
    (mirror / "sub" / "only-mirror.de").write_bytes(b"Spiegelzeile\n")
    registry = parse_registry(toy_registry(server.url, toy, b""))
    out = tmp_path / "out"
    build_dataset(
        registry.dataset("toy_en_de"),
        registry,
        Fetcher(tmp_path / "cache", mirror=str(mirror)),
        out,
        ["dev"],
    )
    assert (out / "dev.en").read_text() == "mirror line\n"
    assert (out / "dev.de").read_text() == "Spiegelzeile\n"
    assert server.requests == []  # nothing downloaded
    # a mirror file failing its checksum is rejected: the archive alternative is used instead
    (mirror / "sub" / "only-mirror.en").write_bytes(b"tampered\n")
    build_dataset(
        registry.dataset("toy_en_de"),
        registry,
        Fetcher(tmp_path / "cache", mirror=str(mirror)),
        out,
        ["dev"],
    )
    assert (out / "dev.en").read_text() == "dev line\n"


def test_url_mirror(server, toy, tmp_path):
    registry = parse_registry(toy_registry("http://127.0.0.1:9/unreachable", toy, b""))
    out = tmp_path / "out"
    fetcher = Fetcher(tmp_path / "cache", mirror=server.url + "/")
    build_dataset(registry.dataset("toy_en_de"), registry, fetcher, out, ["train"])
    assert (out / "train.de").read_text() == "eins\nzwei\ndrei\nvier\n"


def test_corrupt_archive_rejected_and_good_extraction_kept(server, toy, tmp_path):
    registry = parse_registry(toy_registry(server.url, toy, b""))
    cache = tmp_path / "cache"
    out = tmp_path / "out"
    build_dataset(registry.dataset("toy_en_de"), registry, Fetcher(cache), out, ["test"])
    extracted = sorted(p for p in (cache / "extracted").rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in extracted}

    corrupt = bytearray(toy)
    corrupt[len(corrupt) // 2] ^= 0xFF
    stored = (cache / "toy.tgz").stat()
    (cache / "toy.tgz").write_bytes(bytes(corrupt))  # damaged on disk, its times kept (a bad
    os.utime(cache / "toy.tgz", ns=(stored.st_atime_ns, stored.st_mtime_ns))  # sector, not a user)
    server.files["toy.tgz"] = bytes(corrupt)  # and served damaged
    with pytest.raises(UserError) as err:
        build_dataset(registry.dataset("toy_en_de"), registry, Fetcher(cache), out, ["test"])
    message = str(err.value)
    assert "toy.tgz" in message and "sha256" in message and "--mirror" in message
    assert not (cache / "toy.tgz").exists() and not (cache / "toy.tgz.part").exists()
    assert {p: p.read_bytes() for p in extracted} == before  # extracted data untouched
    assert (out / "test.en").read_text() == "Hello world.\nSecond line\n"


def test_unreadable_archive_without_checksum_never_extracted(tmp_path):
    (tmp_path / "bad.tgz").write_bytes(b"not a tar archive at all" * 100)
    registry = parse_registry({"files": {"bad.tgz": {}}, "datasets": {}})
    fetcher = Fetcher(tmp_path / "cache", mirror=str(tmp_path))
    with pytest.raises(UserError, match="corrupt or unreadable archive"):
        fetcher.extract(tmp_path / "bad.tgz", registry.files["bad.tgz"], ["a.txt"])
    assert [p for p in (tmp_path / "cache" / "extracted").iterdir()] == []


def test_offline_without_mirror_lists_files_to_provide(toy, tmp_path):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there any more: connection refused, as offline
    registry = parse_registry(toy_registry(f"http://127.0.0.1:{port}", toy, b""))
    with pytest.raises(UserError) as err:
        build_dataset(
            registry.dataset("toy_en_de"),
            registry,
            Fetcher(tmp_path / "cache"),
            tmp_path / "out",
            ["train", "dev"],
        )
    message = str(err.value)
    for name in ("toy.tgz", "plain.en.gz", "plain.de.gz"):
        assert name in message
    assert "cannot obtain 3 file(s)" in message
    assert "(dev dev can instead come from only-mirror.en + only-mirror.de)" in message
    assert "--mirror DIR" in message and str(tmp_path / "cache") in message
    assert not (tmp_path / "out" / "train.en").exists()


def test_mismatched_part_names_both_files_and_counts(server, tmp_path):
    server.files["a.en"] = b"1\n2\n3\n"
    server.files["a.de"] = b"1\n2\n"
    registry = parse_registry(
        {
            "files": {"a.en": {"url": f"{server.url}/a.en"}, "a.de": {"url": f"{server.url}/a.de"}},
            "datasets": {
                "x": {
                    "src": "en",
                    "tgt": "de",
                    "splits": {
                        s: [
                            {
                                "name": "p",
                                "from": [{"src": {"file": "a.en"}, "tgt": {"file": "a.de"}}],
                            }
                        ]
                        for s in ("train", "dev", "test")
                    },
                }
            },
        }
    )
    with pytest.raises(UserError, match=r"a\.en has 3 sentences but .*a\.de has 2"):
        build_dataset(
            registry.dataset("x"), registry, Fetcher(tmp_path / "c"), tmp_path / "o", ["train"]
        )


def test_sgm_without_closing_tag_is_an_error(tmp_path):
    path = tmp_path / "x.sgm"
    path.write_text('<seg id="1">open\n')
    with pytest.raises(UserError, match="x.sgm:1"):
        list(read_sentences(path, "sgm"))


def test_shipped_registry():
    registry = load_registry()
    assert set(registry.datasets) >= {
        "wmt14_en_de",
        "wmt14_en_fr",
        "multi30k_en_de",
        "smoke_en_de",
        "smoke_en_fr",
    }
    de = registry.dataset("wmt14_en_de")
    assert [p.name for p in de.splits["train"]] == [
        "europarl-v7",
        "commoncrawl",
        "news-commentary-v9",
    ]
    fr = registry.dataset("wmt14_en_fr")
    assert [p.name for p in fr.splits["train"]] == [
        "europarl-v7",
        "commoncrawl",
        "un",
        "news-commentary-v9",
        "giga-fren",
    ]
    for dataset in (de, fr):
        assert dataset.splits["dev"][0].lines == 3000 and dataset.splits["test"][0].lines == 3003
        formats = {alt.src.format for alt in dataset.splits["test"][0].alternatives}
        assert formats == {"text", "sgm"}
    for name in ("training-giga-fren.tar", "test-full.tgz", "dev.tgz", "training-parallel-un.tgz"):
        assert registry.files[name].url.startswith("https://www.statmt.org/")
    with pytest.raises(ConfigError, match="unknown dataset"):
        registry.dataset("wmt15")


@pytest.mark.parametrize(
    "generate, message",
    [
        ({"lexicon_percent": 0}, r"\.lexicon_percent: must be an integer from 1 to 100"),
        ({"two_clause_percent": 101}, r"\.two_clause_percent: must be an integer from 0 to 100"),
        ({"two_clause_percent": 0.5}, r"\.two_clause_percent"),
        ({"nouns": 3}, r": unknown keys \['nouns'\]"),
        ({"dev": 0}, r"\.dev: must be an integer of at least 1, got 0"),  # an empty dev split
        ({"dev": -5}, r"\.dev: must be an integer of at least 1, got -5"),
        ({"seed": -1}, r"\.seed: must be an integer of at least 0"),
    ],
)
def test_registry_rejects_bad_generator_parameters(generate, message):
    raw = {"src": "en", "tgt": "de", "generate": {"seed": 1, "train": 5, "dev": 1, "test": 1}}
    raw["generate"] |= generate
    with pytest.raises(ConfigError, match=r"datasets\.smoke\.generate" + message):
        parse_registry({"files": {}, "datasets": {"smoke": raw}})


def test_registry_rejects_a_url_whose_basename_differs():
    with pytest.raises(ConfigError, match="basename"):
        parse_registry({"files": {"a.tgz": {"url": "http://x/b.tgz"}}, "datasets": {}})


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "transformer_core", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


needs_shared = pytest.mark.skipif(
    not (SHARED_DATA / "wmt" / "newstest2013.en").is_file(),
    reason=f"shared test data not found at {SHARED_DATA}",
)


@needs_shared
@pytest.mark.parametrize("dataset, tgt", [("wmt14_en_de", "de"), ("wmt14_en_fr", "fr")])
def test_newstest_from_shared_data_mirror(tmp_path, dataset, tgt):
    out = tmp_path / dataset
    result = cli(
        "download",
        "--dataset",
        dataset,
        "--splits",
        "dev",
        "test",
        "--mirror",
        str(SHARED_DATA),
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["lines"] == {"dev": 3000, "test": 3003}
    first = {
        "de": "Gutach: Increased safety for pedestrians",
        "fr": "Spectacular Wingsuit Jump Over Bogota",
    }
    assert (out / "test.en").read_text(encoding="utf-8").split("\n")[0] == first[tgt]
    assert len((out / f"test.{tgt}").read_text(encoding="utf-8").split("\n")) == 3004
    assert all(f["checksum_verified"] for f in manifest["files"].values())


@needs_shared
def test_multi30k_from_shared_data_mirror(tmp_path):
    out = tmp_path / "m30k"
    result = cli(
        "download", "--dataset", "multi30k_en_de", "--mirror", str(SHARED_DATA), "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "manifest.json").read_text())["lines"] == {
        "train": 29000,
        "dev": 1014,
        "test": 1000,
    }
    assert (
        (out / "train.en")
        .read_text(encoding="utf-8")
        .startswith("Two young, White males are outside")
    )
    assert "multi30k_en_de: train 29000 lines" in result.stderr


def test_cli_offline_error_is_clean(tmp_path):
    # wmt14 dev/test with an empty mirror and an unreachable network: exit 2, no traceback
    env = {**os.environ, "https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}
    result = subprocess.run(
        [sys.executable, "-m", "transformer_core", "download", "--dataset", "wmt14_en_de", "--splits", "test",
         "--mirror", str(tmp_path / "empty"), "--out", str(tmp_path / "out"), "--retries", "0"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "test-full.tgz" in result.stderr and "--mirror DIR" in result.stderr
