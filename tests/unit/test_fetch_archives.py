"""Archives as they come: member paths spelled ``./training/x`` or ``training/x``, members that
try to leave the extraction folder, a member that is missing (and the alternative that then
serves the part), a file of the wrong size or checksum, an archive cut short, a corpus with
the wrong number of lines, and WMT sgm read as sacreBLEU reads it. Each test builds real tar
archives in its own folder and checks what the user sees: the error names the file, the corpus
and the numbers, and nothing is left behind in the download cache, the extraction folder or
the output folder."""

import copy
import hashlib

import pytest
import yaml
from corpora import tar_bytes
from sacrebleu.dataset.fake_sgml import FakeSGMLDataset
from test_data_download import FileServer

from transformer_core.data.fetch import Fetcher
from transformer_core.data.registry import (
    REGISTRY_VARIABLE,
    load_registry,
    member_path,
    parse_registry,
)
from transformer_core.data.sources import build_dataset, read_sentences
from transformer_core.errors import ConfigError, UserError

EN = [f"sentence number {i} in English" for i in range(6)]
DE = [f"Satz Nummer {i} auf Deutsch" for i in range(6)]


def lines(texts) -> bytes:
    return "".join(t + "\n" for t in texts).encode()


def registry_of(files: dict, train_from: list, *, lines_expected=None, dev_from=None):
    """A one-dataset registry (``toy``): its train part and, when given, its dev part."""
    part = {"name": "corpus", "from": train_from}
    if lines_expected is not None:
        part["lines"] = lines_expected
    splits = {"train": [part], "dev": [{"name": "newstest", "from": dev_from or train_from}]}
    splits["test"] = splits["dev"]
    raw = {"files": files, "datasets": {"toy": {"src": "en", "tgt": "de", "splits": splits}}}
    return parse_registry(raw)


def from_archive(name: str, src: str, tgt: str, fmt: str = "text") -> dict:
    return {
        "src": {"file": name, "member": src, "format": fmt},
        "tgt": {"file": name, "member": tgt, "format": fmt},
    }


def build(registry, tmp_path, splits=("train",), mirror=None):
    fetcher = Fetcher(tmp_path / "cache", mirror=str(mirror or tmp_path / "mirror"), retries=0)
    return build_dataset(registry.dataset("toy"), registry, fetcher, tmp_path / "out", splits)


def files_under(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("stored", ["training/c.en", "./training/c.en", "././training//c.en"])
@pytest.mark.parametrize("asked", ["training/c.en", "./training/c.en"])
def test_members_match_however_the_archive_spells_their_path(tmp_path, stored, asked):
    (tmp_path / "mirror").mkdir()
    archive = tar_bytes({stored: lines(EN), stored[:-2] + "de": lines(DE)})
    (tmp_path / "mirror" / "c.tgz").write_bytes(archive)
    registry = registry_of({"c.tgz": {}}, [from_archive("c.tgz", asked, asked[:-2] + "de")])
    build(registry, tmp_path)
    assert (tmp_path / "out" / "train.en").read_text() == "\n".join(EN) + "\n"
    assert (tmp_path / "out" / "train.de").read_text() == "\n".join(DE) + "\n"


def test_members_that_leave_the_folder_are_never_extracted(tmp_path):
    (tmp_path / "mirror").mkdir()
    escapes = {
        "../escaped.en": b"outside\n",
        "/tmp/absolute.en": b"absolute\n",
        "training/../../escaped.de": b"outside\n",
    }
    (tmp_path / "mirror" / "c.tgz").write_bytes(tar_bytes(escapes))
    registry = registry_of(
        {"c.tgz": {}}, [from_archive("c.tgz", "escaped.en", "training/escaped.de")]
    )
    with pytest.raises(UserError) as err:
        build(registry, tmp_path)
    assert "c.tgz: members not found: escaped.en, training/escaped.de" in str(err.value)
    assert not (tmp_path / "escaped.en").exists() and not (tmp_path.parent / "escaped.de").exists()
    assert files_under(tmp_path / "cache") == []
    assert [member_path(name) for name in escapes] == [None, None, None]
    with pytest.raises(ConfigError, match=r"train\[0\]\.from\[0\]\.src\.member: '\.\./x'"):
        registry_of({"c.tgz": {}}, [from_archive("c.tgz", "../x", "y")])


WMT_DEV = {  # newstest2013 as dev.tgz holds it: sgm and plain text
    "dev/newstest2013-src.en.sgm": "<srcset>\n<doc>\n"
    + "".join(f'<seg id="{i + 1}">{t}</seg>\n' for i, t in enumerate(EN))
    + "</doc>\n</srcset>\n",
    "dev/newstest2013.en": "\n".join(EN) + "\n",
    "dev/newstest2013.de": "\n".join(DE) + "\n",
}
DEV_ALTERNATIVES = [
    {"src": {"file": "newstest2013.en"}, "tgt": {"file": "newstest2013.de"}},
    from_archive("dev.tgz", "dev/newstest2013-src.en.sgm", "dev/newstest2013-ref.de.sgm", "sgm"),
    from_archive("dev.tgz", "dev/newstest2013.en", "dev/newstest2013.de"),
]
DEV_FILES = {"dev.tgz": {}, "newstest2013.en": {}, "newstest2013.de": {}}


def test_a_member_missing_from_the_archive_falls_back_to_the_next_alternative(tmp_path, capsys):
    (tmp_path / "mirror").mkdir()  # the German sgm is missing; the plain text is there
    dev = {name: text.encode() for name, text in WMT_DEV.items()}
    (tmp_path / "mirror" / "dev.tgz").write_bytes(tar_bytes(dev))
    registry = registry_of(DEV_FILES, DEV_ALTERNATIVES, dev_from=DEV_ALTERNATIVES)
    manifest = build(registry, tmp_path, splits=("dev",))
    assert (tmp_path / "out" / "dev.de").read_text() == "\n".join(DE) + "\n"
    assert manifest["splits"]["dev"][0]["src"] == "dev.tgz:dev/newstest2013.en"
    log = capsys.readouterr().err
    assert "members not found: dev/newstest2013-ref.de.sgm" in log
    assert "using dev.tgz:dev/newstest2013.en + dev.tgz:dev/newstest2013.de instead" in log


def test_a_missing_member_without_another_alternative_is_one_line(tmp_path):
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "c.tgz").write_bytes(tar_bytes({"training/c.en": lines(EN)}))
    registry = registry_of({"c.tgz": {}}, [from_archive("c.tgz", "training/c.en", "training/c.de")])
    with pytest.raises(UserError) as err:
        build(registry, tmp_path)
    message = str(err.value)
    assert "\n" not in message
    assert message == (
        f"dataset toy, train corpus: {tmp_path / 'mirror' / 'c.tgz'}: "
        "members not found: training/c.de"
    )
    assert not (tmp_path / "out" / "train.en").exists()


def served_registry(server, archive: bytes, **entry) -> object:
    server.files["c.tgz"] = archive
    files = {"c.tgz": {"url": f"{server.url}/c.tgz", **entry}}
    return registry_of(files, [from_archive("c.tgz", "training/c.en", "training/c.de")])


@pytest.fixture
def server():
    s = FileServer()
    yield s
    s.close()


GOOD = tar_bytes({"training/c.en": lines(EN), "training/c.de": lines(DE)})


def test_a_download_with_the_wrong_checksum_is_refused_and_nothing_is_kept(server, tmp_path):
    other = tar_bytes({"training/c.en": lines(DE), "training/c.de": lines(EN)})
    registry = served_registry(server, other, sha256=hashlib.sha256(GOOD).hexdigest())
    with pytest.raises(UserError) as err:
        build(registry, tmp_path)
    message = str(err.value)
    assert f"{server.url}/c.tgz: rejected, {tmp_path / 'cache' / 'c.tgz.part'}: sha256 " in message
    assert f"{hashlib.sha256(other).hexdigest()} does not match the registry's" in message
    assert hashlib.sha256(GOOD).hexdigest() in message
    assert files_under(tmp_path / "cache") == []  # neither the file, its .part, nor extractions
    assert not (tmp_path / "out").exists()


def test_a_download_of_the_wrong_size_is_refused_before_it_is_written(server, tmp_path):
    registry = served_registry(server, GOOD, size=len(GOOD) + 1)
    with pytest.raises(UserError) as err:
        build(registry, tmp_path)
    expected = f"the server announces {len(GOOD)} bytes, the registry expects {len(GOOD) + 1}"
    assert expected in str(err.value)
    assert server.requests == [("c.tgz", None)]
    assert files_under(tmp_path / "cache") == []


def test_a_local_copy_of_the_wrong_size_is_not_used(server, tmp_path):
    registry = served_registry(server, GOOD, size=len(GOOD))
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "c.tgz").write_bytes(GOOD[:-1])  # one byte short
    build(registry, tmp_path)
    assert server.requests == [("c.tgz", None)]  # refused: downloaded instead
    assert (tmp_path / "cache" / "c.tgz").read_bytes() == GOOD
    assert (tmp_path / "out" / "train.en").read_text() == "\n".join(EN) + "\n"


def test_a_cache_file_the_user_put_there_is_refused_and_kept(server, tmp_path):
    """The offline message invites the user to put files into the cache: one that fails the
    registry's checks (here, a registry with a wrong checksum and the user's right file) is
    named and kept, never deleted nor overwritten; one a download stored is replaced."""
    wrong = hashlib.sha256(b"not the archive").hexdigest()
    registry = served_registry(server, GOOD, sha256=wrong)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "c.tgz").write_bytes(GOOD)  # the user's good file
    with pytest.raises(
        UserError, match=r"c\.tgz: sha256 .* was not stored by a download, so it is kept"
    ):
        build(registry, tmp_path)
    assert (tmp_path / "cache" / "c.tgz").read_bytes() == GOOD and server.requests == []
    # A file a download stored, then pinned to another checksum: deleted and fetched again.
    (tmp_path / "cache" / "c.tgz").unlink()
    build(served_registry(server, GOOD, sha256=hashlib.sha256(GOOD).hexdigest()), tmp_path)
    (tmp_path / "out").rename(tmp_path / "first")
    server.requests.clear()
    registry = served_registry(server, GOOD, size=len(GOOD), sha256=wrong)
    with pytest.raises(UserError, match="rejected"):  # the server's copy fails the pin too
        build(registry, tmp_path)
    assert server.requests == [("c.tgz", None)] and not (tmp_path / "cache" / "c.tgz").exists()


@pytest.mark.parametrize("mode", ["w", "w:gz"])
def test_an_archive_cut_short_names_the_member_and_leaves_nothing(tmp_path, mode):
    big = lines(f"line {i} " + "x" * 60 for i in range(2000))
    archive = tar_bytes({"training/c.en": big, "training/c.de": big}, mode=mode)
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "c.tgz").write_bytes(archive[: len(archive) // 3])
    registry = registry_of({"c.tgz": {}}, [from_archive("c.tgz", "training/c.en", "training/c.de")])
    with pytest.raises(UserError) as err:
        build(registry, tmp_path)
    message = str(err.value)
    assert f"{tmp_path / 'mirror' / 'c.tgz'}: corrupt or unreadable archive" in message
    assert "at member training/c.en" in message and "delete it and download again" in message
    assert files_under(tmp_path / "cache") == []  # no half-extracted member
    assert not (tmp_path / "out").exists()


def test_a_pinned_archive_cut_short_is_refused_by_its_size(tmp_path, capsys):
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "c.tgz").write_bytes(GOOD[:100])
    sha256 = hashlib.sha256(GOOD).hexdigest()
    files = {"c.tgz": {"size": len(GOOD), "sha256": sha256}}
    registry = registry_of(files, [from_archive("c.tgz", "training/c.en", "training/c.de")])
    with pytest.raises(UserError) as err:
        build(registry, tmp_path)
    refused = f"rejecting mirror file: {tmp_path / 'mirror' / 'c.tgz'}: 100 bytes, the registry"
    assert f"{refused} expects {len(GOOD)}" in capsys.readouterr().err
    message = str(err.value)  # the registry's numbers, for whoever fetches the file by hand
    assert "cannot obtain 1 file(s)" in message and f"size {len(GOOD)}, sha256 {sha256}" in message
    assert files_under(tmp_path / "cache") == []


def test_a_wrong_line_count_is_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "c.tgz").write_bytes(GOOD)
    registry = registry_of(
        {"c.tgz": {}},
        [from_archive("c.tgz", "training/c.en", "training/c.de")],
        lines_expected=len(EN) + 1,
    )
    with pytest.raises(UserError) as err:
        build(registry, tmp_path, splits=("dev", "train"))
    assert str(err.value) == (
        "train corpus corpus (c.tgz:training/c.en + c.tgz:training/c.de): "
        f"{len(EN)} sentence pairs, the registry expects {len(EN) + 1}"
    )
    assert files_under(tmp_path / "out") == []  # dev was complete, but nothing is renamed


SGM = (
    '<srcset setid="newstest2014" srclang="any">\n<doc sysid="ref" docid="1">\n'
    '<seg id="1">Plain segment.</seg>\n'
    '<seg id="2">Trailing text</seg> after the tag\n'
    '<seg id="3">  Runs \t of   spaces </seg>\n'
    '<seg id="4">Two</seg> closing </seg> tags\n'
    '<seg id="5"></seg>\n'
    "</doc>\n</srcset>\n"
)


def test_sgm_is_read_as_sacrebleu_reads_it(tmp_path):
    path = tmp_path / "newstest.sgm"
    path.write_text(SGM, encoding="utf-8")
    reference = tmp_path / "sacrebleu.txt"
    FakeSGMLDataset.__new__(FakeSGMLDataset)._convert_format(str(path), str(reference))
    expected = reference.read_text(encoding="utf-8").split("\n")[:-1]
    assert list(read_sentences(path, "sgm")) == expected
    assert expected[1] == "Trailing text after the tag"


def test_a_registry_file_can_replace_the_shipped_one(tmp_path, monkeypatch):
    path = tmp_path / "registry.yaml"
    raw = {
        "files": {"c.tgz": {"size": len(GOOD)}},
        "datasets": {"toy": {"src": "en", "tgt": "de", "generate": {"seed": 1, "train": 2}}},
    }
    raw["datasets"]["toy"]["generate"].update(dev=1, test=1)
    path.write_text(yaml.safe_dump(raw))
    monkeypatch.setenv(REGISTRY_VARIABLE, str(path))
    registry = load_registry()
    assert registry.source == str(path) and set(registry.datasets) == {"toy"}
    assert registry.files["c.tgz"].size == len(GOOD)
    monkeypatch.setenv(REGISTRY_VARIABLE, str(tmp_path / "absent.yaml"))
    with pytest.raises(ConfigError, match=rf"\${REGISTRY_VARIABLE}: cannot read .*absent\.yaml"):
        load_registry()
    monkeypatch.delenv(REGISTRY_VARIABLE)
    assert load_registry().source == "shipped" and "wmt14_en_de" in load_registry().datasets


@pytest.mark.parametrize("size", [0, -5, "12", True])
def test_a_registry_size_must_be_a_positive_integer(size):
    with pytest.raises(ConfigError, match=r"files\.c\.tgz\.size: must be an integer of at least 1"):
        parse_registry({"files": {"c.tgz": {"size": size}}, "datasets": {}})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        # YAML reads an unquoted checksum of digits as a number: never "no checksum".
        ({"files": {"c.tgz": {"sha256": 0}}}, r"files\.c\.tgz\.sha256: must be a string of 64 hex"),
        ({"files": {"c.tgz": {"sha256": "ab" * 31}}}, r"files\.c\.tgz\.sha256: must be a string"),
        ({"files": {"c.tgz": {"md5": 123}}}, r"files\.c\.tgz\.md5: must be a string of 32 hex"),
        ({"files": [1, 2]}, r"^files: must be a mapping, got \[1, 2\]$"),
        ({"files": {"a.gz": [1]}}, r"^files\.a\.gz: must be a mapping"),
        ({"files": {"a.gz": {"url": 123}}}, r"^files\.a\.gz\.url: must be a non-empty string"),
        ({"files": {"a.gz": {"mirror_dirs": "multi30k"}}}, r"^files\.a\.gz\.mirror_dirs: must be a list"),
        ({"datasets": {"x": [1]}}, r"^datasets\.x: must be a mapping"),
        ({"datasets": {"x": {"src": "en", "tgt": "de", "splits": {"train": [1]}}}},
         r"^datasets\.x\.splits\.train\[0\]: must be a mapping"),
    ],
)  # fmt: skip
def test_a_malformed_registry_is_one_line_naming_the_key(raw, message):
    with pytest.raises(ConfigError, match=message):
        parse_registry({"files": {}, "datasets": {}, **raw})


def test_the_shipped_wmt14_archives_are_pinned():
    registry = load_registry()
    for name in ("wmt14_en_de", "wmt14_en_fr"):
        dataset = registry.dataset(name)
        archives = {
            source.file
            for parts in dataset.splits.values()
            for part in parts
            for alt in part.alternatives
            for source in (alt.src, alt.tgt)
            if source.member
        }
        for archive in archives:
            entry = registry.files[archive]
            assert entry.sha256 or entry.md5, f"{archive} has no checksum"
    train = [
        "training-parallel-europarl-v7.tgz",
        "training-parallel-commoncrawl.tgz",
        "training-parallel-nc-v9.tgz",
        "training-parallel-un.tgz",
        "training-giga-fren.tar",
    ]
    assert all(registry.files[name].size and registry.files[name].sha256 for name in train)
    de_train = registry.dataset("wmt14_en_de").splits["train"]
    assert [p.lines for p in de_train] == [1_920_209, 2_399_123, 201_288]
    assert sum(p.lines for p in de_train) == 4_520_620


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ({"sha265": "0" * 64}, r"files\.c\.tgz: unknown key 'sha265'"),  # skipped the check
        ({"sha256": None}, r"files\.c\.tgz\.sha256: must be a string of 64 hex digits"),
        ({"md5": ""}, r"files\.c\.tgz\.md5: must be a string of 32 hex digits"),
    ],
)
def test_a_misspelled_or_empty_checksum_is_refused_not_skipped(entry, named):
    raw = {"files": {"c.tgz": entry}, "datasets": {}}
    with pytest.raises(ConfigError, match=named):
        parse_registry(raw)


def test_every_level_of_the_registry_refuses_an_unknown_key():
    source = {"file": "c.tgz"}
    dataset = {"src": "en", "tgt": "de", "splits": {
        split: [{"name": "p", "from": [{"src": source, "tgt": source}]}]
        for split in ("train", "dev", "test")}}  # fmt: skip
    parse_registry({"files": {"c.tgz": {}}, "datasets": {"d": dataset}})
    for edit, named in (
        (lambda d: d.update(splts={}), "datasets.d: unknown key 'splts'"),
        (lambda d: d["splits"]["train"][0].update(line=5), r"train\[0\]: unknown key 'line'"),
        (lambda d: d["splits"]["dev"][0]["from"][0].update(sr=source), "unknown key 'sr'"),
        (lambda d: d["splits"]["test"][0]["from"][0]["src"].update(membr="a"), "'membr'"),
    ):
        broken = copy.deepcopy(dataset)
        edit(broken)
        with pytest.raises(ConfigError, match=named):
            parse_registry({"files": {"c.tgz": {}}, "datasets": {"d": broken}})


def test_a_registry_file_named_shipped_is_read(tmp_path, monkeypatch):
    raw = {"files": {}, "datasets": {"toy": {"src": "en", "tgt": "de",
           "generate": {"seed": 1, "train": 2, "dev": 1, "test": 1}}}}  # fmt: skip
    (tmp_path / "shipped").write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(REGISTRY_VARIABLE, "shipped")
    registry = load_registry()
    assert set(registry.datasets) == {"toy"} and registry.source == str(tmp_path / "shipped")
