"""A rehearsal of the WMT14 EN-DE download, end to end, against a local server.

A real HTTP server on 127.0.0.1 (``http.server``, Range requests answered) serves shrunk
copies of the statmt.org archives: the same file names and the same member paths as the real
ones (Europarl, Common Crawl, News Commentary v9 stored as ``./training/...``, dev.tgz with
newstest2013 in sgm and plain text, test-full.tgz with newstest2014 in sgm), a few hundred
lines each. Their checksums cannot be the real ones, so the test writes a registry file of its
own: the shipped ``wmt14_en_de`` entry unchanged (its alternatives, members and formats) with
the shrunk archives' sizes, sha256 and line counts, named by ``$TRANSFORMER_CORE_REGISTRY``.
The shipped registry is never touched.

The data stage then runs as a user runs it, ``snakemake --configfile`` with ``mirror`` pointed
at the server: download (the plain newstest files the registry prefers are not on the server,
so dev and test fall back to the sgm in dev.tgz and test-full.tgz), checksums, extraction,
prepare, sentencepiece, binarize. Then `transformer-core download` against a server that drops
the connection halfway (resumed with Range, or one clear error and a later run that resumes)
and one that serves another file (refused; nothing kept).
"""

import copy
import hashlib
import json
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from conftest import ROOT, SMOKE, snakemake
from corpora import generated_sentences, tar_bytes

from transformer_core.data.registry import REGISTRY_VARIABLE

# German-looking words for the generated English ones, so that the pairs are parallel.
GERMAN = {
    "the": "der", "cat": "Katze", "dog": "Hund", "house": "Haus", "garden": "Garten",
    "river": "Fluss", "walks": "geht", "sees": "sieht", "finds": "findet", "small": "klein",
    "green": "grün", "old": "alt", "runs": "läuft", "near": "nahe", "under": "unter", "a": "ein",
    "bird": "Vogel", "tree": "Baum", "red": "rot", "quickly": "schnell", "slowly": "langsam",
    "and": "und", "with": "mit", "from": "von",
}  # fmt: skip
CORPORA = {"europarl": 300, "commoncrawl": 300, "news-commentary": 200, "dev": 100, "test": 100}


def pairs(corpus: str) -> tuple[list[str], list[str]]:
    """The English and German sides of one shrunk corpus."""
    seed = list(CORPORA).index(corpus)
    english = generated_sentences(CORPORA[corpus], seed=seed)
    return english, [" ".join(GERMAN[w] for w in s.split()) for s in english]


def text(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def sgm(lines: list[str], setid: str) -> bytes:
    """WMT "fake SGML"; one segment has text after its closing tag, which sacreBLEU keeps."""
    segs = [f'<seg id="{i}">{line}</seg>' for i, line in enumerate(lines, 1)]
    words = lines[1].split()
    segs[1] = f'<seg id="2">{" ".join(words[:-1])}</seg> {words[-1]}'
    body = "\n".join(segs)
    return f'<srcset setid="{setid}" srclang="any">\n<doc docid="1">\n{body}\n</doc>\n</srcset>\n'.encode()


def statmt_archives() -> dict[str, bytes]:
    """The shrunk archives, under their statmt.org names, with the real member paths."""
    ep, cc, nc = pairs("europarl"), pairs("commoncrawl"), pairs("news-commentary")
    dev, test = pairs("dev"), pairs("test")
    return {
        "training-parallel-europarl-v7.tgz": tar_bytes({
            "training/europarl-v7.de-en.de": text(ep[1]),
            "training/europarl-v7.de-en.en": text(ep[0]),
            "training/europarl-v7.fr-en.en": text(ep[0]),  # another pair's corpus, never read
        }),
        "training-parallel-commoncrawl.tgz": tar_bytes({
            "commoncrawl.de-en.annotation": text(["-"] * len(cc[0])),
            "commoncrawl.de-en.de": text(cc[1]),
            "commoncrawl.de-en.en": text(cc[0]),
        }),
        "training-parallel-nc-v9.tgz": tar_bytes({
            "./training/news-commentary-v9.de-en.de": text(nc[1]),
            "./training/news-commentary-v9.de-en.en": text(nc[0]),
        }),
        "dev.tgz": tar_bytes({
            "dev/newstest2013-src.en.sgm": sgm(dev[0], "newstest2013"),
            "dev/newstest2013-ref.de.sgm": sgm(dev[1], "newstest2013"),
            "dev/newstest2013.en": text(dev[0]),
            "dev/newstest2013.de": text(dev[1]),
        }),
        "test-full.tgz": tar_bytes({
            "test-full/newstest2014-deen-src.en.sgm": sgm(test[0], "newstest2014"),
            "test-full/newstest2014-deen-ref.de.sgm": sgm(test[1], "newstest2014"),
        }),
    }  # fmt: skip


def rehearsal_registry(archives: dict[str, bytes]) -> dict:
    """The shipped registry's ``wmt14_en_de`` with the shrunk archives' sizes, checksums and
    line counts; its archives come from the mirror only (no URL: nothing leaves 127.0.0.1)."""
    shipped = yaml.safe_load((ROOT / "transformer_core" / "data" / "datasets.yaml").read_text())
    dataset = copy.deepcopy(shipped["datasets"]["wmt14_en_de"])
    counts = iter(CORPORA.values())
    for split in ("train", "dev", "test"):
        for part in dataset["splits"][split]:
            part["lines"] = next(counts)
    used = {
        source["file"]
        for parts in dataset["splits"].values()
        for part in parts
        for alternative in part["from"]
        for source in (alternative["src"], alternative["tgt"])
    }
    files = {name: shipped["files"][name] for name in sorted(used)}  # as shipped: the plain
    for name, data in archives.items():  # newstest copies, which the server does not have
        files[name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return {"files": files, "datasets": {"wmt14_en_de": dataset}}


class StatmtServer:
    """Serves ``files`` (name -> bytes) at ``/NAME``, answering Range requests. ``cut[name] = n``
    makes the next whole-file response stop after n bytes and drop the connection."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.cut, self.requests = dict(files), {}, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                name, asked = self.path.lstrip("/"), self.headers.get("Range")
                outer.requests.append((name, asked))
                if name not in outer.files:
                    self.send_error(404)
                    return
                data = outer.files[name]
                start = int(asked.split("=")[1].rstrip("-")) if asked else 0
                self.send_response(206 if asked else 200)
                if asked:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                if not asked and name in outer.cut:
                    self.wfile.write(data[: outer.cut.pop(name)])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(data[start:])

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def archives():
    return statmt_archives()


@pytest.fixture
def server(archives):
    s = StatmtServer(archives)
    yield s
    s.close()


@pytest.fixture
def registry_file(archives, tmp_path, monkeypatch):
    path = tmp_path / "rehearsal-registry.yaml"
    path.write_text(yaml.safe_dump(rehearsal_registry(archives), sort_keys=False))
    monkeypatch.setenv(REGISTRY_VARIABLE, str(path))
    return path


def test_the_en_de_data_stage_runs_end_to_end_against_a_statmt_like_server(
    server, registry_file, tmp_path
):
    config = yaml.safe_load(SMOKE.read_text())
    config["mirror"] = server.url
    config["pairs"] = {"en_de": {"dataset": "wmt14_en_de", "vocab_size": 64, "shards": 2}}
    config["table2"]["pairs"] = ["en_de"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    targets = [f"data/en_de/bin/{split}.json" for split in ("train", "dev", "test")]
    proc = snakemake(
        tmp_path / "work", "--cores", "2", *targets,
        configfiles=(tmp_path / "config.yaml",), timeout=300, cwd=tmp_path,
    )  # fmt: skip
    work = tmp_path / "work"
    log = (work / "logs" / "download" / "en_de.log").read_text()
    assert proc.returncode == 0, proc.stderr[-5000:] + log

    manifest = json.loads((work / "data" / "en_de" / "raw" / "manifest.json").read_text())
    assert manifest["lines"] == {"train": 800, "dev": 100, "test": 100}
    assert manifest["registry"] == str(registry_file)
    assert all(f["checksum_verified"] for f in manifest["files"].values())
    assert [p["src"] for p in manifest["splits"]["dev"] + manifest["splits"]["test"]] == [
        "dev.tgz:dev/newstest2013-src.en.sgm",
        "test-full.tgz:test-full/newstest2014-deen-src.en.sgm",
    ]
    assert ("newstest2013.en", None) in server.requests  # not on the server: then dev.tgz
    assert "using dev.tgz:dev/newstest2013-src.en.sgm + dev.tgz:dev/newstest2013-ref.de.sgm" in log

    raw = work / "data" / "en_de" / "raw"
    english = [
        s for corpus in ("europarl", "commoncrawl", "news-commentary") for s in pairs(corpus)[0]
    ]
    assert (raw / "train.en").read_text().splitlines() == english
    assert (raw / "dev.de").read_text().splitlines() == pairs("dev")[1]  # trailing text kept
    fetched = sorted({name for name, _ in server.requests if name in server.files})
    assert fetched == sorted(server.files)  # every archive, each fetched once
    assert len([r for r in server.requests if r[0] in server.files]) == len(server.files)
    extracted = work / "data" / "en_de" / "downloads" / "extracted"
    members = sorted(p.name for p in extracted.rglob("*") if p.is_file())
    assert "europarl-v7.fr-en.en" not in members and "commoncrawl.de-en.annotation" not in members

    report = json.loads((work / "data" / "en_de" / "prepared" / "train.report.json").read_text())
    assert report["pairs_in"] == 800
    headers = {
        split: json.loads((work / "data" / "en_de" / "bin" / f"{split}.json").read_text())
        for split in ("train", "dev", "test")
    }
    assert [headers[s]["num_sentences"] for s in ("dev", "test")] == [100, 100]
    assert headers["train"]["num_sentences"] == report["pairs_out"] > 700


def download(server, out, *args):
    """`transformer-core download --dataset wmt14_en_de` from the server (its registry is the
    rehearsal's: the environment names it)."""
    command = [sys.executable, "-m", "transformer_core", "download", "--dataset", "wmt14_en_de",
               "--mirror", server.url, "--out", str(out), *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_a_dropped_connection_resumes_with_range(server, registry_file, tmp_path):
    europarl = "training-parallel-europarl-v7.tgz"
    half = len(server.files[europarl]) // 2
    server.cut[europarl] = half
    out, part = tmp_path / "raw", tmp_path / "downloads" / f"{europarl}.part"

    proc = download(server, out, "--splits", "train", "--retries", "0")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"why:  {server.url}{europarl}: cut off after {half} bytes" in proc.stderr
    assert "run again to resume" in proc.stderr
    assert part.stat().st_size == half and not (out / "train.en").exists()

    server.cut[europarl] = half  # cut again: this time the run retries, resuming
    proc = download(server, out, "--splits", "train")
    assert proc.returncode == 0, proc.stderr
    assert f"{server.url}{europarl}: resuming at {half}" in proc.stderr
    assert (europarl, f"bytes={half}-") in server.requests
    assert not part.exists()
    assert (tmp_path / "downloads" / europarl).read_bytes() == server.files[europarl]
    assert json.loads((out / "manifest.json").read_text())["lines"] == {"train": 800}


@pytest.mark.parametrize("same_size", [True, False])
def test_a_server_that_serves_another_file_is_refused(server, registry_file, tmp_path, same_size):
    name = "training-parallel-commoncrawl.tgz"
    good = server.files[name]
    if same_size:
        server.files[name] = good[:100] + bytes([good[100] ^ 0xFF]) + good[101:]
    else:
        server.files[name] = server.files["training-parallel-nc-v9.tgz"]
    proc = download(server, tmp_path / "raw", "--splits", "train")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    if same_size:
        served = hashlib.sha256(server.files[name]).hexdigest()
        assert f"{name}.part: sha256 {served} does not match the registry's" in proc.stderr
    else:
        announced = len(server.files[name])
        assert f"the server announces {announced} bytes, the registry expects {len(good)}" in (
            proc.stderr
        )
    downloads = tmp_path / "downloads"
    assert not [p for p in downloads.rglob("*") if p.name.startswith(name)]  # nothing kept
    assert not (tmp_path / "raw" / "train.en").exists()
