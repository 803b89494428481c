"""The command policy: which run_command strings are refused, by which rule, and which are not."""

from __future__ import annotations

import random

import pytest

from loopwright.agent.policy import check_command
from loopwright.protected_paths import DEFAULT_PROTECTED_PATHS, is_protected

RULES = {"server", "background", "kill", "git_remote", "sudo", "unparseable"}

REFUSED = [
    # long-running servers
    ("python-http-server", "python -m http.server 8000", "server"),
    ("python3-http-server", "python3 -m http.server", "server"),
    ("python311-http-server", "/usr/bin/python3.11 -u -m http.server", "server"),
    ("uvicorn", "uvicorn app.main:app --reload", "server"),
    ("python-m-uvicorn", "python -m uvicorn app:app", "server"),
    ("gunicorn", "gunicorn -w 2 wsgi:app", "server"),
    ("hypercorn", "hypercorn app:app", "server"),
    ("daphne", "daphne proj.asgi:application", "server"),
    ("flask-run", "flask --app hello run --port 5000", "server"),
    ("python-m-flask-run", "python -m flask run", "server"),
    ("django-admin-runserver", "django-admin runserver", "server"),
    ("manage-py-runserver", "python manage.py runserver 0.0.0.0:8000", "server"),
    ("dot-slash-manage-py", "./manage.py runserver", "server"),
    ("npm-start", "npm start", "server"),
    ("npm-run-dev", "npm run dev", "server"),
    ("npm-run-serve", "npm run serve", "server"),
    ("npm-run-start", "npm run start", "server"),
    ("npm-run-preview", "npm run preview -- --port 4173", "server"),
    ("npm-run-start-colon", "npm run start:prod", "server"),
    ("npm-prefix-run-dev", "npm --prefix web run dev", "server"),
    ("yarn-start", "yarn start", "server"),
    ("yarn-dev", "yarn dev", "server"),
    ("pnpm-dev", "pnpm dev", "server"),
    ("pnpm-start", "pnpm start", "server"),
    ("npx-vite", "npx vite", "server"),
    ("vite-bare", "vite", "server"),
    ("vite-preview", "vite preview", "server"),
    ("webpack-dev-server", "webpack-dev-server --mode development", "server"),
    ("webpack-serve", "webpack serve", "server"),
    ("next-dev", "next dev", "server"),
    ("next-start", "npx next start -p 3000", "server"),
    ("nodemon", "nodemon src/index.js", "server"),
    ("node-server-js", "node server.js", "server"),
    ("node-app-js", "node app.js", "server"),
    ("node-index-js", "node index.js", "server"),
    ("node-src-server-js", "node src/server.js", "server"),
    ("node-main-mjs", "node --enable-source-maps dist/main.mjs", "server"),
    ("node-start-cjs", "node ./start.cjs", "server"),
    ("python-app-py", "python app.py", "server"),
    ("php-builtin-server", "php -S localhost:8000", "server"),
    ("rails-server", "rails server", "server"),
    ("bin-rails-s", "bin/rails s -p 3000", "server"),
    ("bundle-exec-rails-s", "bundle exec rails s", "server"),
    ("ruby-un-httpd", "ruby -run -e httpd . -p 8000", "server"),
    ("serve", "serve -s build", "server"),
    ("http-server", "http-server ./public", "server"),
    ("tail-f", "tail -f /tmp/app.log", "server"),
    ("tail-F-cluster", "tail -Fn 20 app.log", "server"),
    ("tail-follow-long", "tail --follow=name app.log", "server"),
    ("sleep-infinity", "sleep infinity", "server"),
    ("watch", "watch -n 1 ls", "server"),
    ("poetry-run-uvicorn", "poetry run uvicorn app:app", "server"),
    ("uv-run-flask", "uv run --with flask flask run", "server"),
    ("tsc-watch", "tsc --watch", "server"),
    # background jobs
    ("trailing-ampersand", "python worker.py &", "background"),
    ("inline-ampersand", "sleep 5 & echo started", "background"),
    ("ampersand-no-space", "make build&", "background"),
    ("ampersand-after-redirect", "./run.sh > out.log 2>&1 &", "background"),
    ("subshell-background", "( cd app && ./build.sh ) &", "background"),
    ("nohup", "nohup ./long_job.sh", "background"),
    ("setsid", "setsid ./job.sh", "background"),
    ("disown", "./job.sh; disown", "background"),
    ("screen", "screen -dmS app ./job.sh", "background"),
    ("tmux", "tmux new -d './job.sh'", "background"),
    ("bg", "bg %1", "background"),
    ("daemonize", "daemonize /usr/bin/job", "background"),
    ("start-stop-daemon", "start-stop-daemon --start --exec /bin/job", "background"),
    # killing
    ("kill", "kill 1234", "kill"),
    ("kill-9", "kill -9 -1", "kill"),
    ("pkill", "pkill -f node", "kill"),
    ("killall", "killall python", "kill"),
    ("xargs-kill", "pgrep node | xargs kill", "kill"),
    ("xargs-options-kill", "pgrep node | xargs -r -n 1 kill -9", "kill"),
    ("full-path-kill", "/usr/bin/kill 42", "kill"),
    ("single-quote-trick", "'k'ill 42", "kill"),
    ("double-quote-trick", '"kill" 42', "kill"),
    ("backslash-trick", "\\kill 42", "kill"),
    ("ansi-c-quote-trick", "$'\\x6bill' 42", "kill"),
    ("find-exec-kill", "find /proc -maxdepth 0 -exec kill {} +", "kill"),
    # git remotes
    ("git-push", "git push origin HEAD:main", "git_remote"),
    ("git-push-force", "git push --force", "git_remote"),
    ("git-C-push", "git -C repo -c core.x=1 push", "git_remote"),
    ("git-remote-add", "git remote add evil https://example.com/x.git", "git_remote"),
    ("git-remote-set-url", "git remote set-url origin https://example.com/x.git", "git_remote"),
    ("git-remote-rename", "git remote rename origin upstream", "git_remote"),
    ("git-remote-remove", "git remote remove origin", "git_remote"),
    ("git-config-remote-url", "git config remote.origin.url https://x/y.git", "git_remote"),
    (
        "git-config-insteadof",
        "git config --global url.https://x/.insteadOf https://y/",
        "git_remote",
    ),
    # privileges
    ("sudo", "sudo apt-get install -y jq", "sudo"),
    ("su", "su -c 'id' root", "sudo"),
    ("doas", "doas pip install x", "sudo"),
    ("sudo-after-and", "npm ci && sudo npm start", "sudo"),
    # separators and nesting
    ("after-semicolon", "echo hi; kill 1", "kill"),
    ("after-and", "make && npm start", "server"),
    ("after-or", "false || pkill node", "kill"),
    ("after-pipe", "echo x | kill 1", "kill"),
    ("after-newline", "echo one\nkill 1", "kill"),
    ("line-continuation", "npm \\\n  start", "server"),
    ("bash-c", "bash -c 'npm start'", "server"),
    ("bash-lc", 'bash -lc "kill 1"', "kill"),
    ("sh-c", "sh -c 'sleep 100 &'", "background"),
    ("zsh-c", "zsh -c 'git push'", "git_remote"),
    ("bash-c-nested", "bash -c \"sh -c 'kill 1'\"", "kill"),
    ("eval", 'eval "kill 1"', "kill"),
    ("dollar-paren", "echo $(kill 1)", "kill"),
    ("dollar-paren-in-double-quotes", 'echo "pid: $(pkill node)"', "kill"),
    ("backticks", "echo `kill 1`", "kill"),
    ("subshell", "(cd web && npm run dev)", "server"),
    ("brace-group", "{ echo a; kill 1; }", "kill"),
    ("if-then", "if true; then kill 1; fi", "kill"),
    ("while-loop-body", "while true; do sleep 1; kill 2; done", "kill"),
    ("heredoc-to-bash", "bash <<'EOF'\nkill 1\nEOF", "kill"),
    ("echo-piped-to-sh", "echo 'npm start' | sh", "server"),
    ("heredoc-substitution", "cat <<EOF\n$(kill 1)\nEOF", "kill"),
    ("process-substitution", "diff <(kill 1) b.txt", "kill"),
    # env prefixes and wrappers
    ("env-assignment", "FOO=1 BAR='a b' kill 1", "kill"),
    ("env-wrapper", "env -i PATH=/bin kill 1", "kill"),
    ("env-split-string", "env -S 'npm start'", "server"),
    ("timeout", "timeout 5 npm start", "server"),
    ("timeout-signal", "timeout -s KILL 5 kill 1", "kill"),
    ("nice", "nice kill 1", "kill"),
    ("nice-n", "nice -n 5 npm start", "server"),
    ("time", "time npm start", "server"),
    ("command", "command kill 1", "kill"),
    ("exec", "exec kill 1", "kill"),
    ("stdbuf", "stdbuf -oL npm start", "server"),
    ("busybox", "busybox kill 1", "kill"),
    ("stacked-wrappers", "env FOO=1 timeout 10 nice -n 5 stdbuf -oL /usr/bin/kill 1", "kill"),
    # unparseable
    ("unclosed-single-quote", "echo 'hello", "unparseable"),
    ("unclosed-double-quote", 'grep "foo src/', "unparseable"),
    ("unclosed-backtick", "echo `date", "unparseable"),
    ("unclosed-dollar-paren", "echo $(date", "unparseable"),
    ("unclosed-subshell", "(cd src && ls", "unparseable"),
    ("nested-too-deeply", '"$(' * 3000, "unparseable"),
]

ALLOWED = [
    ("pytest", "pytest -q"),
    ("python-m-pytest", "python -m pytest tests/unit -x"),
    ("npm-test", "npm test"),
    ("npm-run-test", "npm run test -- --coverage"),
    ("npm-ci", "npm ci"),
    ("npm-run-build", "npm run build"),
    ("yarn-test", "yarn test"),
    ("pnpm-install", "pnpm install --frozen-lockfile"),
    ("node-test", "node --test"),
    ("node-test-file", "node test/foo.test.js"),
    ("node-eval", "node -e \"console.log(require('./src/app.js'))\""),
    ("node-script", "node scripts/build.js"),
    ("python-main-py", "python main.py --help"),
    ("go-test", "go test ./..."),
    ("cargo-test", "cargo test"),
    ("make-test", "make test"),
    ("grep-kill-argument", "grep -r kill src/"),
    ("grep-kill-quoted", "grep -rn 'kill -9' ."),
    ("echo-npm-start", 'echo "npm start"'),
    ("printf-kill", "printf '%s\\n' 'kill 1'"),
    ("git-diff", "git diff"),
    ("git-status", "git status --short"),
    ("git-log", "git log --oneline -5"),
    ("git-fetch", "git fetch origin"),
    ("git-pull", "git pull --ff-only"),
    ("git-clone", "git clone https://example.com/x.git /tmp/x"),
    ("git-remote-v", "git remote -v"),
    ("git-config-get-remote", "git config --get remote.origin.url"),
    ("git-commit-message-push", "git commit -m 'do not push yet'"),
    ("sleep-1", "sleep 1"),
    ("cat-server-js", "cat server.js"),
    ("vitest", "vitest run"),
    ("npx-vitest", "npx vitest run"),
    ("vite-build", "npx vite build"),
    ("next-build", "next build"),
    ("tail-n", "tail -n 50 build.log"),
    ("redirect-2-to-1", "make 2>&1 | tail -n 20"),
    ("redirect-both", "npm test &> out.log"),
    ("redirect-dup", "npm test >& out.log"),
    ("pipe-stderr", "make |& tee log"),
    ("and-chain", "npm ci && npm test"),
    ("or-chain", "pytest || cat log.txt"),
    ("for-loop", "for f in src/*.py; do python -m py_compile $f; done"),
    ("arithmetic-ampersand", "echo $(( 6 & 3 ))"),
    ("arithmetic-command", "(( x = 6 & 3 )); echo $x"),
    ("array-assignment", "arr=(a b c); echo ${arr[@]}"),
    ("heredoc-with-code", "cat > run.py <<'EOF'\nimport os\nos.kill(pid, 9)  # don't & won't\nEOF"),
    ("heredoc-quoted-substitution", "cat <<'EOF'\n$(kill 1)\nEOF"),
    ("comment-with-kill", "ls # kill it later"),
    ("command-v", "command -v kill"),
    ("bash-script", "bash scripts/test.sh"),
    ("env-pytest", "env PYTHONPATH=src pytest"),
    ("timeout-pytest", "timeout 60 pytest -x"),
    ("subshell-tests", "(cd web && npm test)"),
    ("bash-c-tests", "bash -c 'cd web && npm test'"),
    ("find-exec-rm", "find . -name '*.pyc' -exec rm {} \\;"),
    ("pip-install-user", "pip install --user -e ."),
    ("uvicorn-help", "uvicorn --help"),
    ("poetry-run-pytest", "poetry run pytest"),
    ("curly-kill-in-string", "echo '{ kill 1; }'"),
    ("empty", ""),
    ("whitespace", "   \n  "),
]


@pytest.mark.parametrize(("command", "rule"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused(command: str, rule: str) -> None:
    refusal = check_command(command)
    assert refusal is not None, f"{command!r} should be refused"
    assert refusal.rule == rule
    assert refusal.message


@pytest.mark.parametrize("command", [c[1] for c in ALLOWED], ids=[c[0] for c in ALLOWED])
def test_allowed(command: str) -> None:
    assert check_command(command) is None


def test_server_message_points_at_verification() -> None:
    refusal = check_command("npm run dev")
    assert refusal is not None
    assert "verification boots the app; call finish when the tests pass" in refusal.message
    assert "npm run dev" in refusal.message


@pytest.mark.parametrize(
    ("command", "instead"),
    [
        ("python app.js & ", "foreground"),
        ("kill 1", "timeout"),
        ("git push", "call finish"),
        ("sudo ls", "without"),
        ("echo 'x", "Fix the quoting"),
    ],
    ids=["background", "kill", "git_remote", "sudo", "unparseable"],
)
def test_messages_say_what_to_do_instead(command: str, instead: str) -> None:
    refusal = check_command(command)
    assert refusal is not None
    assert instead in refusal.message


def test_arbitrary_text_never_raises() -> None:
    pieces = [*" \t\n;&|()<>$`\"'\\{}#=-x", "kill", "npm start", "bash -c", "$(", "<<EOF", "EOF"]
    rng = random.Random(20)
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 25)))
        refusal = check_command(text)
        assert refusal is None or refusal.rule in RULES


def test_long_commands_are_shortened_in_the_message() -> None:
    refusal = check_command("npm start " + "x" * 500)
    assert refusal is not None
    assert len(refusal.message) < 700


PROTECTED = [
    (".github/workflows/ci.yml", True),
    ("./.github//workflows/deep/x.yaml", True),
    (".github/actions/setup/action.yml", True),
    ("CODEOWNERS", True),
    (".github/CODEOWNERS", True),
    ("docs/CODEOWNERS", True),
    (".loopwright.yml", True),
    (".github/loopwright.yml", True),
    ("src/../.github/workflows/ci.yml", True),
    (".github/dependabot.yml", False),
    (".github/workflows", True),
    ("src/workflows/ci.yml", False),
    ("src/app.py", False),
    ("CODEOWNERS.md", False),
]


@pytest.mark.parametrize(("path", "expected"), PROTECTED, ids=[p for p, _ in PROTECTED])
def test_default_protected_paths(path: str, expected: bool) -> None:
    assert is_protected(path, DEFAULT_PROTECTED_PATHS) is expected


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/secrets.txt", "a/b/secrets.txt", True),
        ("**/secrets.txt", "secrets.txt", True),
        ("a/**/b.txt", "a/x/y/b.txt", True),
        ("a/**/b.txt", "a/b.txt", True),
        ("*.lock", "deep/dir/yarn.lock", True),
        ("/*.lock", "deep/dir/yarn.lock", False),
        ("/*.lock", "yarn.lock", True),
        ("build/", "build/out.js", True),
        ("build/", "build", False),
        ("migrations/*.sql", "migrations/001.sql", True),
        ("migrations/*.sql", "migrations/old/001.sql", False),
        ("file?.txt", "file1.txt", True),
        ("file[0-9].txt", "file7.txt", True),
        ("file[!0-9].txt", "file7.txt", False),
    ],
)
def test_glob_patterns(pattern: str, path: str, expected: bool) -> None:
    assert is_protected(path, [pattern]) is expected


def test_negation_exempts_a_path() -> None:
    patterns = [".github/workflows/**", "!.github/workflows/generated.yml"]
    assert is_protected(".github/workflows/ci.yml", patterns)
    assert not is_protected(".github/workflows/generated.yml", patterns)
