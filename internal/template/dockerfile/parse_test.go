package dockerfile

import (
	"errors"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/errs"
)

func TestParse(t *testing.T) {
	f, err := Parse(strings.NewReader(`# syntax comment
ARG BASE=base
FROM ${BASE}
ARG VERSION=1.2
ENV A=1 B="two words"
ENV LEGACY value with spaces
WORKDIR /app
COPY --chown=1000:1000 --chmod=0640 requirements.txt ./
RUN pip install -r requirements.txt && \
    echo done
RUN ["python3", "-c", "print(1)"]
USER user
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.From != "base" || f.FromLine != 3 {
		t.Errorf("FROM %q line %d", f.From, f.FromLine)
	}
	var got []string
	for _, s := range f.Steps {
		got = append(got, s.Cmd+" "+strings.Join(s.Args, "|"))
	}
	want := []string{
		"ARG VERSION=1.2",
		`ENV A|1|B|"two words"`,
		"ENV LEGACY|value with spaces",
		"WORKDIR /app",
		"COPY requirements.txt|./",
		"RUN pip install -r requirements.txt &&     echo done",
		"RUN python3|-c|print(1)",
		"USER user",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if f.Steps[4].Chown != "1000:1000" || f.Steps[4].Chmod != 0o640 || f.Steps[5].Chmod != -1 || !f.Steps[6].JSON || f.Steps[5].JSON {
		t.Errorf("flags: %+v", f.Steps)
	}
}

// TestParseCmd: CMD is the template's start command, the last one
// counting; its JSON form is quoted for the shell.
func TestParseCmd(t *testing.T) {
	for src, want := range map[string]string{
		"FROM base\nRUN true\n":                        "",
		"FROM base\nCMD python3 -m http.server 8000\n": "python3 -m http.server 8000",
		"FROM base\nCMD echo one\nRUN true\nCMD [\"python3\", \"-c\", \"print('it''s')\"]\n": `python3 -c 'print('\''it'\'''\''s'\'')'`,
		"FROM base\nCMD [\"sh\", \"-c\", \"echo $HOME\"]\n":                                  `sh -c 'echo $HOME'`,
	} {
		f, err := Parse(strings.NewReader(src))
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if got := f.StartCommand(); got != want {
			t.Errorf("%q: start command %q, want %q", src, got, want)
		}
		for _, st := range f.Steps {
			if st.Cmd == "CMD" {
				t.Errorf("%q: CMD is a build step", src)
			}
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for src, want := range map[string]string{
		"FROM base\nENTRYPOINT [\"bash\"]\n":              "line 2 (ENTRYPOINT [\"bash\"]): ENTRYPOINT is not supported: a sandbox runs the commands its API calls ask for, and a template's one start command is CMD",
		"FROM base\nCMD\n":                                "CMD needs a command",
		"FROM base\nEXPOSE 80\n":                          "EXPOSE is not supported",
		"FROM a AS b\n":                                   "multi-stage builds, which are not supported",
		"FROM a\nFROM b\n":                                "only one FROM is supported",
		"RUN true\nFROM a\n":                              "RUN comes before FROM",
		"FROM a\nRUN --mount=type=cache,target=/x true\n": "the flag --mount=type=cache,target=/x of RUN is not supported",
		"FROM a\nCOPY --from=x a b\n":                     "the flag --from=x of COPY is not supported",
		"FROM a\nFROBNICATE x\n":                          "FROBNICATE is not a Dockerfile instruction Runtime supports",
		"FROM a\nCOPY <<EOF /x\nhi\nEOF\n":                "heredocs are not supported",
		"ENV A=1\n":                                       "ENV comes before FROM",
		"# nothing\n":                                     "no instructions",
		"FROM a\nWORKDIR\n":                               "",
		"FROM a\nCOPY --chmod=u+x a b\n":                  "--chmod=u+x: give an octal mode",
		"FROM a\nCOPY --chmod=17777 a b\n":                "--chmod=17777: give an octal mode",
	} {
		_, err := Parse(strings.NewReader(src))
		if err == nil || !errors.Is(err, errs.Invalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v; want errs.Invalid saying %q", src, err, want)
		}
	}
}
