#!/usr/bin/env python3
"""make_data.py: build the English training corpus for Lily's small demo model (issue 9).

Sources are Debian 12 documentation packages (listed with their licences in SOURCES.md): HTML
manuals (Python, PostgreSQL, SQLite, Git, Debian's own guides) and the manual pages of a fixed list
of packages. The script installs what is missing (apt-get, as root), extracts headings and prose
paragraphs (code blocks, tables, navigation and licence text are dropped), keeps English prose only,
removes exact and near-duplicate paragraphs (MinHash over hashed word 5-shingles with LSH banding),
splits documents into train and validation by a hash of their name, and derives chat exchanges
(a heading or a command's NAME line as the question, the paragraph under it as the answer) rendered
in the Qwen3.5 ChatML format with an empty think block, exactly as the official template renders a
final assistant turn.

Deterministic: the same installed package versions give byte-identical output (files are visited in
sorted order, every hash is a stable one, the shuffle uses a fixed seed).

Output in --out (default tools/demo/data, ignored by git): train.jsonl, valid.jsonl (one document a
line: {"id", "src", "text"}; chat exchanges are documents whose text is the rendered exchange),
stats.json, and samples.txt (the few examples committed beside this script).

    python3 tools/demo/make_data.py [--out DIR] [--no-install] [--jobs 2]
"""

import argparse
import gzip
import hashlib
import html.parser
import json
import os
import random
import re
import subprocess
import sys
import unicodedata
import zlib
from concurrent.futures import ProcessPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))

# Documentation packages with HTML manuals: (package, glob roots, path filter). Every one is in
# Debian main; SOURCES.md has the licences.
HTML_PKGS = ["python3.11-doc", "postgresql-doc-15", "sqlite3-doc", "git-doc", "debian-reference-en",
             "debian-handbook", "debian-policy", "developers-reference", "maint-guide", "debian-faq"]
# Packages whose English manual pages (/usr/share/man/manN, no locale dirs) are used.
MAN_PKGS = ["manpages", "manpages-dev", "coreutils", "findutils", "grep", "sed", "tar", "bash",
            "util-linux", "procps", "systemd", "openssh-client", "curl", "git-man", "apt", "dpkg",
            "man-db", "rsync", "less", "gzip", "diffutils", "make", "gawk"]

# HTML files of those packages that are not prose (change logs, indexes, licence pages, other
# languages).
HTML_SKIP = re.compile(
    r"(changelog|whatsnew|genindex|py-modindex|/search\.html|license|copyright|/bugs\.html|"
    r"/release-\d|/releaselog|/changes\.html|/index\.html$|/contents\.html|/about\.html|"
    r"/_|/RelNotes|/howto-index|debian-handbook/html/(?!en-US/)|\.(?!en\.)[a-z]{2}(_[A-Z]{2})?\.html$)")

SKIP_TAGS = {"script", "style", "pre", "table", "nav", "header", "footer", "head", "form", "svg",
             "math", "select", "button", "textarea"}
SKIP_CLASS = re.compile(r"\b(sphinxsidebar|related|navheader|navfooter|footer|toc|breadcrumb|"
                        r"highlight|literal-block|doctest|headerlink|menu|nav|copyright|"
                        r"synopsis|programlisting|screen|example-contents|funcsynopsis|"
                        r"cmdsynopsis|indexterm)\b")
BLOCK_KIND = {"p": "p", "li": "p", "dd": "p", "dt": "p", "blockquote": "p", "figcaption": "p",
              "h1": "h", "h2": "h", "h3": "h", "h4": "h", "h5": "h", "h6": "h", "caption": "p",
              "div": None, "section": None, "ul": None, "ol": None, "dl": None, "br": None, "td": None}

STOPWORDS = set("""the of and to a in is it that for on as with be are this by or not an from at
which can you if use used when all will file one has have its also may more than then there these
they other such only into each used using any but no was do does so we their some must should
how what new must see two same first value values""".split())

LICENCE_RE = re.compile(r"(permission is hereby granted|general public license|without any warranty|"
                        r"all rights reserved|copyright \(c\)|copyright ©|licensed under|"
                        r"free software foundation|this program is free software|"
                        r"redistribution and use in source)", re.I)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def ensure_packages(pkgs, install):
    have = set()
    for line in sh(["dpkg-query", "-W", "-f", "${Package} ${db:Status-Abbrev}\\n"]).splitlines():
        name, _, st = line.partition(" ")
        if st.startswith("ii"):
            have.add(name)
    missing = [p for p in pkgs if p not in have]
    if missing and install:
        log("installing:", " ".join(missing))
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing,
                       check=True, env=env)
        return ensure_packages(pkgs, False)
    if missing:
        log("warning: not installed, skipped:", " ".join(missing))
    return [p for p in pkgs if p not in missing]


def pkg_version(p):
    return sh(["dpkg-query", "-W", "-f", "${Version}", p]).strip()


def pkg_files(p):
    return sorted(set(sh(["dpkg", "-L", p]).splitlines()))


# ----------------------------------------------------------------------------------------------
# Text cleaning

QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2032": "'"})


def clean_inline(s):
    s = unicodedata.normalize("NFC", s)
    s = s.replace("\u00ad", "").replace("\u00b6", "").replace("\u200b", "")
    # Typographic quotes become ASCII ones: user input has the ASCII forms and a small vocabulary
    # should not spend merges on both.
    s = s.translate(QUOTES)
    s = s.replace("\u00a0", " ").replace("\u2002", " ").replace("\u2003", " ")
    s = re.sub(r"\s+", " ", s).strip()
    return s


def clean_heading(s):
    s = clean_inline(s)
    s = re.sub(r"^(chapter|section|appendix|part)\s+[\dA-Z.]+\s*[.:]?\s*", "", s, flags=re.I)
    s = re.sub(r"^[\dA-Z]?(\.?\d+)*\.?\s+(?=[A-Za-z`\"'(])", "", s)  # "3.2. Foo", "A.1 Foo"
    s = s.strip(" .:#")
    return s


def is_english_prose(s):
    words = re.findall(r"[A-Za-z']+", s)
    if len(words) < 8 or len(s) < 50:
        return False
    n_ascii = sum(1 for c in s if ord(c) < 128)
    if n_ascii < 0.97 * len(s):
        return False
    letters = sum(c.isalpha() for c in s)
    if letters < 0.65 * len(s):  # code, option tables, paths
        return False
    stop = sum(1 for w in words if w.lower() in STOPWORDS)
    if stop < 0.15 * len(words):
        return False
    if LICENCE_RE.search(s):
        return False
    if re.search(r"[{};]\s*$|^\s*[$#>]\s|\b(def|return|import)\b.*[()=]", s):
        return False
    return True


def is_heading(s):
    return 2 <= len(s) <= 80 and len(s.split()) <= 10 and sum(c.isalpha() for c in s) >= 0.6 * len(s)


# ----------------------------------------------------------------------------------------------
# HTML -> blocks [("h"|"p", text)]

class BlockParser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks = []
        self.buf = []
        self.stack = []  # (tag, skipping) for elements that can be skipped or are blocks
        self.skip = 0
        self.kinds = []

    def flush(self):
        text = "".join(self.buf)
        self.buf = []
        if self.kinds and text.strip():
            self.blocks.append((self.kinds[-1], text))

    def handle_starttag(self, tag, attrs):
        cls = " ".join(v or "" for k, v in attrs if k in ("class", "id", "role"))
        if tag in ("br", "img", "hr", "meta", "link", "input", "wbr"):
            if tag == "br":
                self.buf.append(" ")
            return
        skipping = tag in SKIP_TAGS or bool(cls and SKIP_CLASS.search(cls) and tag != "a"
                                            and tag not in ("code", "span", "tt", "em", "strong"))
        if skipping and tag in ("span", "code", "tt", "em", "strong"):
            skipping = False
        kind = BLOCK_KIND.get(tag)
        if tag == "div" and re.search(r"\b(para|simpara)\b", cls):  # DocBook/Publican paragraphs
            kind = "p"
        if tag in BLOCK_KIND or skipping:
            self.flush()
        self.stack.append((tag, skipping, kind is not None))
        if skipping:
            self.skip += 1
        if kind is not None:
            self.kinds.append(kind)

    def handle_endtag(self, tag):
        if not any(t == tag for t, _, _ in self.stack):
            return
        if tag in BLOCK_KIND:
            self.flush()
        while self.stack:
            t, skipping, block = self.stack.pop()
            if skipping:
                self.skip -= 1
                if self.skip == 0:
                    self.buf = []
            if block:
                if t != tag:
                    self.flush()
                self.kinds.pop()
            if t == tag:
                break

    def handle_data(self, data):
        if self.skip == 0:
            self.buf.append(data)


def html_blocks(path):
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    p = BlockParser()
    try:
        p.feed(raw.decode("utf-8", errors="replace"))
        p.close()
    except Exception:  # noqa: BLE001 - a malformed page is skipped, not fatal
        return []
    p.flush()
    out = []
    for kind, text in p.blocks:
        text = clean_heading(text) if kind == "h" else clean_inline(text)
        if text:
            out.append((kind, text))
    return out


# ----------------------------------------------------------------------------------------------
# man page -> blocks. The page is rendered by man(1) to plain text without hyphenation or
# justification and with a very wide line, so each paragraph comes out as one line.

def man_blocks(path):
    env = dict(os.environ, MANWIDTH="4000", LANG="C.UTF-8", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    try:
        txt = subprocess.run(["man", "--nh", "--nj", "-E", "UTF-8", "-l", path], capture_output=True,
                             env=env, timeout=60).stdout.decode("utf-8", errors="replace")
    except subprocess.TimeoutExpired:
        return []
    txt = re.sub(r".\x08", "", txt)  # overstrike bold/underline if any
    lines = txt.split("\n")
    if len(lines) > 2:
        lines = lines[1:-2]  # running header and footer lines
    blocks = []
    section = None
    for line in lines:
        if not line.strip():
            continue
        if not line.startswith(" ") and line.strip().isupper():
            section = line.strip()
            blocks.append(("h", section.title()))
            continue
        if section == "NAME":
            blocks.append(("name", clean_inline(line)))
        elif section in ("SYNOPSIS", "SEE ALSO", "AUTHOR", "AUTHORS", "COPYRIGHT", "REPORTING BUGS",
                         "COLOPHON", "FILES", "EXAMPLES", "EXAMPLE", "HISTORY", "VERSIONS",
                         "STANDARDS", "CONFORMING TO", "ATTRIBUTES", "LIBRARY", "BUGS"):
            continue
        else:
            indent = len(line) - len(line.lstrip())
            text = clean_inline(line)
            if indent <= 7 and len(text) < 60 and not text.endswith("."):
                blocks.append(("term", text))  # option or subsection label
            else:
                blocks.append(("p", text))
    return blocks


# ----------------------------------------------------------------------------------------------
# Documents and chat exchanges

def stable_hash(s):
    return int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")


def render_chat(question, answer):
    # The official template (shared/data/qwen3.5-chat_template.jinja) renders a user turn followed
    # by a final assistant turn with empty reasoning like this (spec §5.4); checked against jinja2
    # in main() when jinja2 is available.
    return ("<|im_start|>user\n" + question.strip() + "<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n" + answer.strip() + "<|im_end|>\n")


QUESTION_FORMS = ["Tell me about {h}.", "Explain {h}.", "What can you tell me about {h}?",
                  "Can you describe {h}?", "{h}?", "I'd like to know about {h}."]
MAN_FORMS = ["What does {c} do?", "What is {c}?", "What is the {c} command for?",
             "Explain {c}.", "Tell me about {c}."]


def lower_first(h):
    # "Using interactive rebases" -> "using interactive rebases"; names such as "DocXMLRPCServer",
    # "PL/pgSQL" or "SQLite" keep their case.
    first = h.split(" ", 1)[0]
    if len(first) > 1 and first[0].isupper() and first[1:].islower() and first.isalpha():
        return h[0].lower() + h[1:]
    return h


def blocks_to_doc(blocks, is_man):
    """Turn blocks into document text and candidate exchanges (question, answer)."""
    parts, pairs = [], []
    heading = None
    name_line = None
    answer_for = None  # question waiting for its first paragraph
    for kind, text in blocks:
        if kind == "name":
            name_line = text
            continue
        if kind in ("h", "term"):
            if kind == "h" and is_heading(text):
                parts.append(text)
                heading = text
                answer_for = ("h", heading)
                if is_man and text.lower() == "description" and name_line:
                    answer_for = ("man", name_line)
            continue
        if not is_english_prose(text):
            continue
        parts.append(text)
        # An answer must be a whole statement: paragraphs that end in ":" introduced a code block
        # that was dropped. Man pages give one exchange only (NAME line -> DESCRIPTION), since
        # their other section names ("Errors", "Options") say nothing on their own.
        if (answer_for and 80 <= len(text) <= 900 and text[-1] in ".!?)"
                and (not is_man or answer_for[0] == "man")):
            pairs.append((answer_for, text))
        answer_for = None
    if is_man and name_line:
        parts.insert(0, name_line)
    return parts, pairs


def make_question(kind, subject, seed):
    if kind == "man":
        m = re.match(r"([\w.+:-]+(?:\s*,\s*[\w.+:-]+)*)\s+[-\u2010\u2013\u2014]+\s+(.+)", subject)
        if not m:
            return None
        cmd = m.group(1).split(",")[0].strip()
        return MAN_FORMS[seed % len(MAN_FORMS)].format(c=cmd), m.group(1) + ": " + m.group(2)
    h = subject
    if h.lower() in ("description", "introduction", "overview", "summary", "notes", "note",
                     "details", "example", "examples", "usage", "options", "see also", "tip",
                     "warning", "caution", "important", "background", "discussion"):
        return None
    return QUESTION_FORMS[seed % len(QUESTION_FORMS)].format(h=lower_first(h)), None


# ----------------------------------------------------------------------------------------------
# Near-duplicate removal: MinHash signatures (NPERM permutations of crc32 shingle hashes) banded
# for LSH; a candidate pair is a duplicate when >= DUP_AGREE of the signature agrees.

NPERM, BANDS, DUP_AGREE = 16, 4, 0.75
_P = (1 << 61) - 1
_rng = random.Random(1234)
_A = [_rng.randrange(1, _P) for _ in range(NPERM)]
_B = [_rng.randrange(0, _P) for _ in range(NPERM)]


def minhash(text):
    words = re.findall(r"\w+", text.lower())
    if len(words) < 5:
        shingles = {zlib.crc32(" ".join(words).encode())}
    else:
        shingles = {zlib.crc32(" ".join(words[i:i + 5]).encode()) for i in range(len(words) - 4)}
    return tuple(min((a * x + b) % _P for x in shingles) for a, b in zip(_A, _B))


class Deduper:
    def __init__(self):
        self.exact = set()
        self.bands = [dict() for _ in range(BANDS)]
        self.n_exact = self.n_near = 0

    def keep(self, text):
        key = hashlib.blake2b(re.sub(r"\W+", " ", text.lower()).strip().encode(),
                              digest_size=12).digest()
        if key in self.exact:
            self.n_exact += 1
            return False
        self.exact.add(key)
        sig = minhash(text)
        r = NPERM // BANDS
        for bi in range(BANDS):
            other = self.bands[bi].get(sig[bi * r:(bi + 1) * r])
            if other is not None:
                agree = sum(x == y for x, y in zip(sig, other)) / NPERM
                if agree >= DUP_AGREE:
                    self.n_near += 1
                    return False
        for bi in range(BANDS):
            self.bands[bi].setdefault(sig[bi * r:(bi + 1) * r], sig)
        return True


# ----------------------------------------------------------------------------------------------

def collect_sources(install):
    html_pkgs = ensure_packages(HTML_PKGS, install)
    man_pkgs = ensure_packages(MAN_PKGS + ["man-db", "groff-base"], install)
    items = []  # (src, path, is_man)
    seen_real = set()
    for p in html_pkgs:
        for f in pkg_files(p):
            if not re.search(r"\.html?(\.gz)?$", f) or HTML_SKIP.search(f) or not os.path.isfile(f):
                continue
            real = os.path.realpath(f)
            if real in seen_real:
                continue
            seen_real.add(real)
            items.append((p, f, False))
    for p in man_pkgs:
        for f in pkg_files(p):
            if not re.match(r"/usr/share/man/man[1-8]/[^/]+\.[1-8]\w*(\.gz)?$", f):
                continue
            if os.path.islink(f) or not os.path.isfile(f):
                continue
            real = os.path.realpath(f)
            if real in seen_real:
                continue
            seen_real.add(real)
            items.append((p, f, True))
    versions = {p: pkg_version(p) for p in sorted(set(html_pkgs + man_pkgs))}
    return items, versions


def extract(item):
    src, path, is_man = item
    blocks = man_blocks(path) if is_man else html_blocks(path)
    if is_man and len(blocks) < 4:  # ".so" redirects and stubs
        return src, path, [], []
    parts, pairs = blocks_to_doc(blocks, is_man)
    return src, path, parts, pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "data"))
    ap.add_argument("--no-install", action="store_true", help="use only what is installed")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--valid-frac", type=float, default=0.01)
    ap.add_argument("--max-chat", type=int, default=6000)
    ap.add_argument("--limit", type=int, default=0, help="only the first N source files (tests)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    items, versions = collect_sources(not args.no_install)
    if args.limit:
        items = items[:: max(1, len(items) // args.limit)][: args.limit]
    log(f"{len(items)} source files")
    with ProcessPoolExecutor(args.jobs) as ex:
        results = list(ex.map(extract, items, chunksize=8))

    dd = Deduper()
    docs, pairs_all = [], []
    per_src = {}
    n_par_in = 0
    for src, path, parts, pairs in results:
        kept = []
        good = set()
        for t in parts:
            if not is_english_prose(t):
                kept.append(t)  # headings and the NAME line: kept with their paragraphs only
                continue
            n_par_in += 1
            if dd.keep(t):
                kept.append(t)
                good.add(t)
        # Drop headings left with no paragraph after them.
        text_parts = []
        for i, t in enumerate(kept):
            if t in good:
                text_parts.append(t)
            elif i + 1 < len(kept) and kept[i + 1] in good:
                text_parts.append(t)
        if not good:
            continue
        text = "\n\n".join(text_parts)
        docs.append({"id": path, "src": src, "text": text})
        s = per_src.setdefault(src, {"files": 0, "bytes": 0, "paragraphs": 0})
        s["files"] += 1
        s["bytes"] += len(text.encode())
        s["paragraphs"] += len(good)
        for (kind, subj), ans in pairs:
            if ans in good:
                pairs_all.append((path, kind, subj, ans))

    # Chat exchanges: at most one per (question) and a deterministic subset of --max-chat.
    chats, seen_q = [], set()
    for path, kind, subj, ans in pairs_all:
        qa = make_question(kind, subj, stable_hash(path + subj))
        if not qa or qa[0].lower() in seen_q:
            continue
        q, lead = qa
        seen_q.add(q.lower())
        if lead:  # man page: the NAME line's summary first, then the description
            ans = lead.rstrip(".") + ".\n\n" + ans
        chats.append({"id": "chat:" + path + "#" + subj, "src": "chat", "q": q, "a": ans})
    chats.sort(key=lambda c: stable_hash(c["id"]))
    chats = chats[: args.max_chat]
    for c in chats:
        c["text"] = render_chat(c.pop("q"), c.pop("a"))

    try:  # check the hard-coded rendering against the official template
        import jinja2
        tpl = open(os.path.join(HERE, "../../models/demo/chat_template.jinja")).read() \
            if os.path.exists(os.path.join(HERE, "../../models/demo/chat_template.jinja")) else None
        if tpl and chats:
            m = re.match(r"<\|im_start\|>user\n(.*)<\|im_end\|>\n<\|im_start\|>assistant\n<think>\n\n"
                         r"</think>\n\n(.*)<\|im_end\|>\n$", chats[0]["text"], re.S)
            env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
            ref = env.from_string(tpl).render(messages=[{"role": "user", "content": m.group(1)},
                                                        {"role": "assistant", "content": m.group(2)}])
            assert ref == chats[0]["text"], (ref, chats[0]["text"])
            log("chat rendering matches the official template")
    except ImportError:
        pass

    all_docs = docs + chats
    train, valid = [], []
    for d in all_docs:
        (valid if stable_hash("split:" + d["id"]) % 10000 < args.valid_frac * 10000 else train).append(d)
    rnd = random.Random(20240909)
    train.sort(key=lambda d: d["id"])
    valid.sort(key=lambda d: d["id"])
    rnd.shuffle(train)
    rnd.shuffle(valid)
    for name, ds in (("train", train), ("valid", valid)):
        with open(os.path.join(args.out, name + ".jsonl"), "w", encoding="utf-8") as f:
            for d in ds:
                f.write(json.dumps({"id": d["id"], "src": d["src"], "text": d["text"]},
                                   ensure_ascii=False) + "\n")
    stats = {
        "packages": versions,
        "source_files": len(items),
        "documents": len(docs),
        "chat_exchanges": len(chats),
        "paragraphs_in": n_par_in,
        "dropped_exact_dup": dd.n_exact,
        "dropped_near_dup": dd.n_near,
        "per_source": per_src,
        "train_docs": len(train), "valid_docs": len(valid),
        "train_bytes": sum(len(d["text"].encode()) for d in train),
        "valid_bytes": sum(len(d["text"].encode()) for d in valid),
        "chat_bytes": sum(len(c["text"].encode()) for c in chats),
    }
    with open(os.path.join(args.out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1, sort_keys=True)
    with open(os.path.join(args.out, "samples.txt"), "w", encoding="utf-8") as f:
        r2 = random.Random(7)
        for d in r2.sample(docs, min(4, len(docs))):
            f.write(f"=== {d['src']} {d['id']}\n{d['text'][:1200]}\n\n")
        for c in r2.sample(chats, min(8, len(chats))):
            f.write(f"=== chat {c['id']}\n{c['text']}\n")
    log(json.dumps({k: v for k, v in stats.items() if k not in ("packages", "per_source")}))


if __name__ == "__main__":
    main()
