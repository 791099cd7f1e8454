// Unit tests of ChatTemplate: Jinja2 semantics as transformers configures them (whitespace
// control, trim_blocks/lstrip_blocks, loops, scoping, namespaces, undefined values, filters),
// errors, resource limits and hostile input. Byte-for-byte agreement with Python jinja2 on real
// templates is chat_template_fixture_test's job; expected strings here were checked with jinja2.
#include "common/chat_template/chat_template.h"

#include <pthread.h>

#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// SmolLM2-135M-Instruct's template (GGUF tokenizer.chat_template).
constexpr char kSmolLm2Template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

// Mistral-7B-Instruct-v0.1's template.
constexpr char kMistralTemplate[] =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}";

class ChatTemplateTest : public ::testing::Test {
 protected:
  static std::vector<ChatMessage> Conversation() {
    return {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};
  }

  static absl::StatusOr<std::string> Render(
      std::string_view source, const std::vector<ChatMessage>& messages = Conversation(),
      const RenderOptions& options = {}, const chat_template::ParseOptions& parse = {}) {
    absl::StatusOr<std::unique_ptr<ChatTemplate>> tmpl = ChatTemplate::Parse(source, parse);
    if (!tmpl.ok()) return tmpl.status();
    return (*tmpl)->Render(messages, options);
  }

  // The rendered text, or "ERROR: <message>".
  static std::string R(std::string_view source) {
    absl::StatusOr<std::string> out = Render(source);
    return out.ok() ? *out : absl::StrCat("ERROR: ", out.status().message());
  }

  // The error message of a render that must fail with InvalidArgument.
  static std::string Error(std::string_view source, const RenderOptions& options = {}) {
    absl::StatusOr<std::string> out = Render(source, Conversation(), options);
    if (out.ok()) return absl::StrCat("unexpected success: ", *out);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    return std::string(out.status().message());
  }
};

TEST_F(ChatTemplateTest, RendersSmolLm2Conversation) {
  RenderOptions options;
  options.add_generation_prompt = true;
  EXPECT_EQ(*Render(kSmolLm2Template, {{"user", "Hello!"}}, options),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
  options.add_generation_prompt = false;
  EXPECT_EQ(*Render(kSmolLm2Template, {{"system", "S"}, {"user", "U"}}, options),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
}

TEST_F(ChatTemplateTest, RendersSpecialTokensAndMessages) {
  RenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  EXPECT_EQ(*Render(kMistralTemplate, {{"user", "a"}, {"assistant", "b"}, {"user", "c"}}, options),
            "<s>[INST] a [/INST]b</s>[INST] c [/INST]");
}

TEST_F(ChatTemplateTest, RaiseExceptionFailsWithTheTemplatesMessage) {
  absl::StatusOr<std::string> out = Render(kMistralTemplate, {{"user", "a"}, {"user", "b"}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            "Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_TRUE(ChatTemplate::IsRaisedByTemplate(out.status()));

  out = Render(kMistralTemplate, {{"system", "s"}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_EQ(Error("{{ raise_exception('n=' ~ messages | length) }}"), "n=4");
}

TEST_F(ChatTemplateTest, OtherErrorsNameTheLineAndAreNotRaised) {
  absl::StatusOr<std::string> out = Render("line 1\n{{ 'a' + 1 }}");
  ASSERT_FALSE(out.ok());
  EXPECT_FALSE(ChatTemplate::IsRaisedByTemplate(out.status()));
  EXPECT_EQ(out.status().message(),
            "chat template error, line 2: unsupported operand type(s) for +: 'str' and 'int'");
}

TEST_F(ChatTemplateTest, EvaluatesExpressionsWithPythonSemantics) {
  EXPECT_EQ(R("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }}"),
            "7 9 3 -4 2");
  EXPECT_EQ(R("{{ 10 / 4 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 3.0 }}"),
            "2.5 1024 0.5 0.30000000000000004 1e+16 3.0");
  EXPECT_EQ(R("{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ true + 1 }}"),
            "a1NoneTrue abab [1, 2] 2");
  EXPECT_EQ(R("{{ 1 < 2 < 3 }} {{ 'b' in 'abc' }} {{ 3 not in [1] }} {{ 1 == 1.0 }}"),
            "True True True True");
  EXPECT_EQ(R("{{ none or 'd' }} {{ 0 and 1 }} {{ 'y' if false else 'n' }} [{{ 1 if false }}]"),
            "d 0 n []");
  EXPECT_EQ(R("{{ [1, 'a', none, 1.5, {'k': (1,)}] }}"), "[1, 'a', None, 1.5, {'k': (1,)}]");
  EXPECT_EQ(R("{{ messages[1:3] | map(attribute='role') | join(',') }} {{ 'héllo'[1] }}"),
            "user,assistant é");
  EXPECT_EQ(R("{{ messages[-1].content }} {{ messages[0]['role'] }} {{ 'abc'[::-1] }}"),
            "Bye system cba");
}

TEST_F(ChatTemplateTest, UndefinedValuesRenderEmptyAndAreFalsy) {
  EXPECT_EQ(R("[{{ nope }}][{{ nope is defined }}][{{ nope | default('d') }}]"
              "[{{ messages[0].nope }}][{% if not nope %}falsy{% endif %}]"
              "[{% for x in nope %}x{% else %}empty{% endfor %}][{{ nope | length }}]"),
            "[][False][d][][falsy][empty][0]");
  EXPECT_EQ(Error("{{ nope + 1 }}"), "chat template error, line 1: 'nope' is undefined");
  EXPECT_EQ(Error("{{ nope.x }}"), "chat template error, line 1: 'nope' is undefined");
  EXPECT_EQ(Error("{{ messages[0].nope.x }}"),
            "chat template error, line 1: 'dict object' has no attribute 'nope'");
  EXPECT_EQ(Error("{{ messages[9].role }}"),
            "chat template error, line 1: list object has no element 9");
}

TEST_F(ChatTemplateTest, CallingAnUnknownNameFails) {
  EXPECT_EQ(Error("{{ strftime('%Y') }}"), "chat template error, line 1: 'strftime' is undefined");
  EXPECT_EQ(Error("{{ 'a'() }}"), "chat template error, line 1: 'str' object is not callable");
  EXPECT_EQ(Error("{{ 'a'.nomethod() }}"),
            "chat template error, line 1: 'str object' has no attribute 'nomethod'");
  EXPECT_EQ(Error("{{ 1 | nofilter }}"), "chat template error, line 1: no filter named 'nofilter'");
}

TEST_F(ChatTemplateTest, WhitespaceControlStripsAroundTags) {
  EXPECT_EQ(R("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(R("a \n {{- 'x' -}} \n b"), "axb");
  EXPECT_EQ(R("a \n {#- comment -#} \n b"), "ab");
  EXPECT_EQ(R("a\u3000{{- 'x' }}"), "ax");  // Python's whitespace, not only ASCII
}

TEST_F(ChatTemplateTest, TrimBlocksDropsTheNewlineAfterBlockTags) {
  EXPECT_EQ(R("{% if true %}\nx\n{% endif %}\ny"), "x\ny");
  EXPECT_EQ(R("{# c #}\nx"), "x");
  EXPECT_EQ(R("{{ 'v' }}\nx"), "v\nx");  // not after variable tags
  EXPECT_EQ(R("{% if true +%}\nx{% endif %}"), "\nx");
  EXPECT_EQ(R("text\n"), "text");  // and Jinja2 drops one trailing newline of the template
  EXPECT_EQ(R("text\n\n"), "text\n");
  EXPECT_EQ(R("a\r\nb\r{% if true %}\r\nc{% endif %}"), "a\nb\nc");
}

TEST_F(ChatTemplateTest, LstripBlocksDropsIndentationBeforeBlockTags) {
  EXPECT_EQ(R("line1\n    {% if true %}\n    x\n    {% endif %}\nline2"), "line1\n    x\nline2");
  EXPECT_EQ(R("  {{ 'v' }}\n  {% set a = 1 %}\n  {{ a }}"), "  v\n  1");
  EXPECT_EQ(R("x  {% if true %}y{% endif %}"), "x  y");  // only at the start of a line
  EXPECT_EQ(R("a\n  {%+ if true %}x{% endif %}"), "a\n  x");
  EXPECT_EQ(R("a\n  {# c #}\nb"), "a\nb");
}

TEST_F(ChatTemplateTest, TrimAndLstripBlocksCanBeTurnedOff) {
  chat_template::ParseOptions parse;
  parse.trim_blocks = false;
  parse.lstrip_blocks = false;
  EXPECT_EQ(*Render("a\n  {% if true %}\nx{% endif %}\n", Conversation(), {}, parse), "a\n  \nx");
}

TEST_F(ChatTemplateTest, RawBlocksAreText) {
  EXPECT_EQ(R("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
}

TEST_F(ChatTemplateTest, LoopExposesLoopVariables) {
  EXPECT_EQ(R("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
              "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('a', 'b') }};"
              "{% endfor %}"),
            "104TrueFalse4a;213FalseFalse4b;322FalseFalse4a;431FalseTrue4b;");
  EXPECT_EQ(R("{% for i in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }} {% endfor %}"),
            "-2 1-3 2- ");
}

TEST_F(ChatTemplateTest, LoopFilterElseAndUnpacking) {
  EXPECT_EQ(R("{% for m in messages if m.role == 'user' %}{{ loop.index }}/{{ loop.length }}"
              "{{ m.content }} {% endfor %}"),
            "1/2Hi 2/2Bye ");
  EXPECT_EQ(R("{% for m in messages if false %}x{% else %}none{% endfor %}"), "none");
  EXPECT_EQ(R("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"),
            "a=1;b=2;");
  EXPECT_EQ(Error("{% for a, b in [1] %}{% endfor %}"),
            "chat template error, line 1: cannot unpack non-iterable int object");
}

TEST_F(ChatTemplateTest, LoopElseRunsUnlessAnIterationReachedTheEnd) {
  // Jinja2's quirk: an iteration left by break or continue does not count as iterated.
  EXPECT_EQ(R("{% for i in [1, 2] %}{{ i }}{% break %}{% else %}E{% endfor %}"), "1E");
  EXPECT_EQ(R("{% for i in [1, 2] %}{% continue %}{% else %}E{% endfor %}"), "E");
  EXPECT_EQ(R("{% for i in [1, 2] %}{{ i }}{% else %}E{% endfor %}"), "12");
}

TEST_F(ChatTemplateTest, FilterGeneratorsAreSingleUseAndAlwaysTrue) {
  EXPECT_EQ(R("{% set g = messages | selectattr('role', 'eq', 'tool') %}{{ 'T' if g else 'F' }}"),
            "T");
  EXPECT_EQ(R("{% set g = messages | map(attribute='role') %}{{ g | join(',') }}|{{ g | list }}"),
            "system,user,assistant,user|[]");
  EXPECT_EQ(R("{% set g = [1, 2, 3] | select %}{{ g | first }}{{ g | list }}"), "1[2, 3]");
  EXPECT_THAT(Error("{{ messages | map(attribute='role') | length }}"),
              HasSubstr("object of type 'generator' has no len()"));
  EXPECT_EQ(R("{{ {'a': 1}.items() }} {{ {'a': 1}.keys() | length }}"), "dict_items([('a', 1)]) 1");
}

TEST_F(ChatTemplateTest, BreakAndContinue) {
  EXPECT_EQ(R("{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}"
              "{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "0246");
  EXPECT_EQ(R("{% for i in range(2) %}{% for j in range(3) %}{% if j == 1 %}{% break %}"
              "{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %}"),
            "00 10 ");
}

TEST_F(ChatTemplateTest, LoopIterationsDoNotLeakAssignments) {
  EXPECT_EQ(R("{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = x + 1 %}{{ x }};"
              "{% endfor %}{{ x }}"),
            "01;01;01;0");
  EXPECT_EQ(R("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");  // if opens no scope
}

TEST_F(ChatTemplateTest, NamespaceCarriesStateOutOfLoops) {
  EXPECT_EQ(R("{% set ns = namespace(found=false, n=0) %}{% for m in messages %}"
              "{% if m.role == 'system' %}{% set ns.found = true %}{% endif %}"
              "{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.found }} {{ ns.n }} {{ ns }}"),
            "True 4 <Namespace {'found': True, 'n': 4}>");
  EXPECT_EQ(Error("{% set x = 1 %}{% set x.y = 2 %}"),
            "chat template error, line 1: cannot assign attribute on non-namespace object");
}

TEST_F(ChatTemplateTest, SetForms) {
  EXPECT_EQ(R("{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set t = 1, 2 %}{{ t }}"), "12 (1, 2)");
  EXPECT_EQ(
      R("{% set x %} hi {{ 1 }}{% endset %}[{{ x }}]{% set y | upper %}ab{% endset %}{{ y }}"),
      "[ hi 1]AB");
}

TEST_F(ChatTemplateTest, FiltersMethodsAndTests) {
  const std::pair<const char*, const char*> kCases[] = {
      {"{{ '  x  ' | trim }}|{{ 'xxhixx' | trim('x') }}", "x|hi"},
      {"{{ 'aBc' | upper }}{{ 'aBc' | lower }}{{ 'hello wORLD' | capitalize }}",
       "ABCabcHello world"},
      {"{{ [1, 2, 3] | length }}{{ 'héllo' | length }}{{ {'a': 1} | length }}", "351"},
      {"{{ [1, 2] | join(', ') }}|{{ 42 | string }}|{{ [1, 2] | first }}{{ 'abc' | last }}",
       "1, 2|42|1c"},
      {"{{ '' | default('d') }}|{{ '' | default('d', true) }}", "|d"},
      {"{{ messages | selectattr('role', 'equalto', 'user') | list | length }}", "2"},
      {"{{ {'a': [1, 2.5, none, true], 'b': 'é\"'} | tojson }}",
       "{\"a\": [1, 2.5, null, true], \"b\": \"é\\\"\"}"},
      {"{{ {'a': [1]} | tojson(indent=2) }}", "{\n  \"a\": [\n    1\n  ]\n}"},
      {"{{ ' x '.strip() }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith('x') }}",
       "x|True|False"},
      {"{{ 'a,b'.split(',') }}|{{ ' a  b '.split() }}|{{ 'aB'.upper() }}{{ 'aB'.lower() }}",
       "['a', 'b']|['a', 'b']|ABab"},
      {"{{ {'a': 1}.items() | list }}|{{ {'a': 1}.get('b', 2) }}", "[('a', 1)]|2"},
      {"{{ none is none }}{{ 'a' is string }}{{ 1 is not string }}{{ x is not defined }}",
       "TrueTrueTrueTrue"},
      {"{{ 9 is divisibleby 3 }}{{ 3 is odd }}{{ {} is mapping }}", "TrueTrueTrue"},
      {"{{ range(3) | list }}|{{ range(1, 7, 2) | list }}|{{ dict(a=1) }}",
       "[0, 1, 2]|[1, 3, 5]|{'a': 1}"},
  };
  for (const auto& [source, want] : kCases) EXPECT_EQ(R(source), want) << source;
}

TEST_F(ChatTemplateTest, StringLiteralsDecodePythonEscapes) {
  EXPECT_EQ(R(R"({{ 'a\tb\n' }}{{ "\x41\u00e9\U0001F600" }}{{ 'a' "b" }}{{ '\q' }})"),
            "a\tb\nAé😀ab\\q");
}

TEST_F(ChatTemplateTest, SyntaxErrorsNameTheLine) {
  const std::pair<const char*, const char*> kCases[] = {
      {"{% if true %}x",
       "line 1: unexpected end of template, expected 'elif' or 'else' or "
       "'endif'."},
      {"a\n{{ 1 + }}", "line 2: unexpected end of print statement"},
      {"{% endfor %}", "line 1: encountered unknown tag 'endfor'"},
      {"{{ 'abc }}", "line 1: unterminated string literal"},
      {"{# comment", "line 1: missing end of comment tag"},
      {"x\n\n{{ x ", "line 3: unexpected end of template, unclosed '{{'"},
      {"{% break %}", "line 1: 'break' outside loop"},
      {"{{ (1 }}", "line 1: unexpected '}', expected ')'"},
      {"{% include 'x' %}", "line 1: the 'include' tag is not supported"},
      {"{% macro m(a=1, b) %}{% endmacro %}",
       "line 1: non-default argument follows default argument"},
      {"{% for x in y %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}",
       "line 1: 'break' outside loop"},
      {"{% call m %}{% endcall %}", "line 1: expected call"},
      {"{{ f(*args) }}", "line 1: *args and **kwargs in calls are not supported"},
      {"{{ 99999999999999999999 }}", "line 1: integer literal does not fit in 64 bits"},
      {"{{ a ? b }}", "line 1: unexpected character U+003F"},
  };
  for (const auto& [source, want] : kCases) {
    absl::StatusOr<std::unique_ptr<ChatTemplate>> tmpl = ChatTemplate::Parse(source);
    ASSERT_FALSE(tmpl.ok()) << source;
    EXPECT_EQ(tmpl.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(tmpl.status().message()),
              absl::StrCat("chat template syntax error, ", want))
        << source;
  }
}

TEST_F(ChatTemplateTest, RejectsInvalidUtf8TemplatesAndSanitizesMessages) {
  EXPECT_FALSE(ChatTemplate::Parse("{{ 'a' }}\xff").ok());
  EXPECT_EQ(*Render("{{ messages[0].content }}", {{"user",
                                                   "a\xff"
                                                   "b"}}),
            "a\xEF\xBF\xBD"
            "b");
}

TEST_F(ChatTemplateTest, StepLimitStopsHugeLoops) {
  EXPECT_THAT(Error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                    "{% endfor %}"),
              HasSubstr("step limit"));
  EXPECT_THAT(Error("{{ range(100001) | length }}"), HasSubstr("MAX_RANGE"));
  RenderOptions options;
  options.limits.max_steps = 1000;
  EXPECT_THAT(Error("{% for i in range(2000) %}{% endfor %}", options), HasSubstr("step limit"));
}

TEST_F(ChatTemplateTest, OutputAndStringLimits) {
  RenderOptions options;
  options.limits.max_output_bytes = 100;
  EXPECT_THAT(Error("{% for i in range(101) %}x{% endfor %}", options), HasSubstr("100 bytes"));
  EXPECT_THAT(Error("{{ 'x' * 200 }}", options), HasSubstr("limit"));
  EXPECT_EQ(*Render("{% for i in range(100) %}x{% endfor %}", Conversation(), options),
            std::string(100, 'x'));
  EXPECT_THAT(Error("{{ ('x' * 1000000000) | length }}"), HasSubstr("over the limit"));
  // Doubling a string: over max_string_bytes after 21 rounds.
  EXPECT_THAT(Error("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
              HasSubstr("limit of 1048576 bytes"));
  EXPECT_THAT(Error("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                    "{% set ns.s = ns.s + ns.s %}{% endfor %}"),
              HasSubstr("over the limit"));
  // Growing a string slowly: the allocation budget stops it.
  options = {};
  options.limits.max_allocated_bytes = 1 << 20;
  EXPECT_THAT(Error("{% set ns = namespace(s='') %}{% for i in range(100000) %}"
                    "{% set ns.s = ns.s ~ 'abcdefgh' %}{% endfor %}",
                    options),
              HasSubstr("allocation limit"));
  // Growing a list quadratically: the step budget stops it.
  EXPECT_THAT(Error("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
                    "{% set ns.l = ns.l + [i] %}{% endfor %}"),
              HasSubstr("step limit"));
  EXPECT_THAT(Error("{{ [1] * 1000000000 }}"), HasSubstr("step limit"));
}

// Work that grows with the size of values (scanning strings, comparing list items) counts too,
// so repeating it in a loop cannot run for long.
TEST_F(ChatTemplateTest, WorkProportionalToValueSizesIsBounded) {
  EXPECT_THAT(Error("{% set big = range(100000) | list %}{% for i in range(100000) %}"
                    "{% if -1 in big %}x{% endif %}{% endfor %}"),
              HasSubstr("step limit"));
  EXPECT_THAT(Error("{% set s = 'ab' * 500000 %}{% for i in range(100000) %}"
                    "{{ s.count('x') }}{{ s | length }}{{ 'z' in s }}{% endfor %}"),
              HasSubstr("step limit"));
  EXPECT_THAT(Error("{% set s = 'ab' * 500000 %}{% set t = 'ab' * 500000 %}"
                    "{% for i in range(100000) %}{{ s == t }}{% endfor %}"),
              HasSubstr("step limit"));
  // A large dict literal is built in linear time (keys are hashed).
  std::string dict = "{% set d = {";
  for (int i = 0; i < 50000; ++i) absl::StrAppend(&dict, "'k", i, "': ", i, ", ");
  EXPECT_EQ(R(dict + "} %}{{ d | length }} {{ d['k49999'] }} {{ d.get('k7') }}"), "50000 49999 7");
  EXPECT_EQ(R("{{ {1: 'a', 1.0: 'b', true: 'c', 2.5: 'd'} }}"), "{1: 'c', 2.5: 'd'}");
}

TEST_F(ChatTemplateTest, DeepNestingIsRejectedAtParse) {
  const std::string deep[] = {
      absl::StrCat("{{ ", std::string(5000, '('), "1", std::string(5000, ')'), " }}"),
      absl::StrCat("{{ ", std::string(200, '['), std::string(200, ']'), " }}"),
      [] {
        std::string s = "{{ ";
        for (int i = 0; i < 100000; ++i) s += "not ";
        return s + "1 }}";
      }(),
      [] {
        std::string s = "{{ ";
        for (int i = 0; i < 100000; ++i) s += "- ";
        return s + "1 }}";
      }(),
      [] {
        std::string s = "{{ 1";
        for (int i = 0; i < 100000; ++i) s += " + 1";
        return s + " }}";
      }(),
      [] {
        std::string s = "{{ x";
        for (int i = 0; i < 100000; ++i) s += ".a";
        return s + " }}";
      }(),
      [] {
        std::string s = "{{ x";
        for (int i = 0; i < 100000; ++i) s += " | trim";
        return s + " }}";
      }(),
      [] {
        std::string s = "{{ 1";
        for (int i = 0; i < 50000; ++i) s += " if 1 else 1";
        return s + " }}";
      }(),
      [] {
        std::string s;
        for (int i = 0; i < 10000; ++i) s += "{% if true %}";
        for (int i = 0; i < 10000; ++i) s += "{% endif %}";
        return s;
      }(),
  };
  for (const std::string& source : deep) {
    absl::StatusOr<std::unique_ptr<ChatTemplate>> tmpl = ChatTemplate::Parse(source);
    ASSERT_FALSE(tmpl.ok()) << source.substr(0, 40);
    EXPECT_THAT(std::string(tmpl.status().message()), HasSubstr("nested")) << source.substr(0, 40);
  }
  // Long flat sequences are fine.
  std::string wide = "{{ [";
  for (int i = 0; i < 10000; ++i) wide += "1, ";
  EXPECT_TRUE(ChatTemplate::Parse(wide + "1] | length }}").ok());
  EXPECT_TRUE(ChatTemplate::Parse(std::string(100000, 'x')).ok());
}

// Renders `tmpl` on a thread with a 1 MiB stack (gRPC and worker threads have at least that).
absl::StatusOr<std::string> RenderOnSmallStack(const ChatTemplate& tmpl) {
  struct Job {
    const ChatTemplate* tmpl;
    absl::StatusOr<std::string> out = std::string();
  } job{&tmpl};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{1} << 20);
  pthread_t thread;
  if (pthread_create(
          &thread, &attr,
          [](void* arg) -> void* {
            auto* j = static_cast<Job*>(arg);
            j->out = j->tmpl->Render({{"user", "Hi"}}, {});
            return nullptr;
          },
          &job) != 0) {
    return absl::InternalError("pthread_create failed");
  }
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  return job.out;
}

// The deepest template the default limits accept renders on a small stack: recursion is
// bounded by max_nesting_depth.
TEST_F(ChatTemplateTest, MaximalNestingFitsASmallStack) {
  std::string source;
  for (int i = 0; i < 60; ++i) source += "{% if true %}";
  source += "{{ ";
  for (int i = 0; i < 60; ++i) source += "(";
  source += "messages[0].content";
  for (int i = 0; i < 60; ++i) source += " ~ 'x') | trim";
  source += " }}";
  for (int i = 0; i < 60; ++i) source += "{% endif %}";
  absl::StatusOr<std::unique_ptr<ChatTemplate>> tmpl = ChatTemplate::Parse(source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  absl::StatusOr<std::string> out = RenderOnSmallStack(**tmpl);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "Hi" + std::string(60, 'x'));
}

// Macro calls and recursive loops nest without bound in the tree; RenderLimits::max_depth
// bounds them, within a small stack, however the recursion goes.
TEST_F(ChatTemplateTest, UnboundedRecursionFailsWithinASmallStack) {
  std::string deep_body;  // a macro whose every call nests 60 statements and 60 expressions
  for (int i = 0; i < 60; ++i) deep_body += "{% if true %}";
  deep_body += "{{ ";
  for (int i = 0; i < 60; ++i) deep_body += "(";
  deep_body += "m(n + 1)";
  for (int i = 0; i < 60; ++i) deep_body += " ~ 'x') | trim";
  deep_body += " }}";
  for (int i = 0; i < 60; ++i) deep_body += "{% endif %}";
  const std::string sources[] = {
      "{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}",
      "{% macro m(n) %}" + deep_body + "{% endmacro %}{{ m(0) }}",
      "{% macro m(n=m()) %}{% endmacro %}{{ m() }}",
      "{% macro m() %}{% call m() %}{% endcall %}{{ caller() }}{% endmacro %}{{ m() }}",
      "{% macro m() %}{{ caller() }}{% endmacro %}"
      "{% macro r() %}{% call m() %}{{ r() }}{% endcall %}{% endmacro %}{{ r() }}",
      "{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}",
      "{% for x in [1] recursive %}{% filter upper %}{% with y = loop([x]) %}{{ y }}"
      "{% endwith %}{% endfilter %}{% endfor %}",
      "{% macro m() %}{% for x in [1] recursive %}{{ m() }}{% endfor %}{% endmacro %}{{ m() }}",
  };
  for (const std::string& source : sources) {
    absl::StatusOr<std::unique_ptr<ChatTemplate>> tmpl = ChatTemplate::Parse(source);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    absl::StatusOr<std::string> out = RenderOnSmallStack(**tmpl);
    ASSERT_FALSE(out.ok()) << source.substr(0, 60);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(out.status().message()), HasSubstr("nested too deeply"))
        << source.substr(0, 60);
  }
  // Reasonable recursion is fine: a macro recursing 40 levels.
  EXPECT_EQ(R("{% macro m(n) %}{% if n > 0 %}{{ m(n - 1) }}{{ n % 10 }}{% endif %}{% endmacro %}"
              "{{ m(40) }}"),
            "1234567890123456789012345678901234567890");
}

TEST_F(ChatTemplateTest, MacrosCallBlocksAndScopes) {
  EXPECT_EQ(
      R("{% macro m(a, b=a ~ '!') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}|{{ m(b=2, a=3) }}"),
      "11!|32");
  EXPECT_EQ(
      R("{% macro m() %}[{{ caller('x') }}]{% endmacro %}{% call(v) m() %}{{ v }}{% endcall %}"),
      "[x]");
  EXPECT_EQ(R("{% set x = 1 %}{% with x = 2, y = x %}{{ x }}{{ y }}{% endwith %}{{ x }}"), "211");
  EXPECT_EQ(R("{% filter upper | replace('B', '-') %}ab{% endfilter %}"), "A-");
  EXPECT_EQ(R("{% for x in [[1, [2]], 3] recursive %}{% if x is iterable %}({{ loop(x) }})"
              "{% else %}{{ x }}@{{ loop.depth }}{% endif %}{% endfor %}"),
            "(1@2(2@3))3@1");
  EXPECT_EQ(R("{% set j = joiner('+') %}{% for i in range(3) %}{{ j() }}{{ i }}{% endfor %}"),
            "0+1+2");
  // An error inside a macro names the macro's line once.
  EXPECT_EQ(Error("{% macro m() %}\n{{ 1 / 0 }}{% endmacro %}\n{{ m() }}"),
            "chat template error, line 2: division by zero");
}

TEST_F(ChatTemplateTest, MacroAndBlockOutputIsBounded) {
  RenderOptions options;
  options.limits.max_string_bytes = 1000;
  EXPECT_THAT(
      Error("{% macro m() %}{{ 'x' * 600 }}{{ 'x' * 600 }}{% endmacro %}{{ m() }}", options),
      HasSubstr("limit"));
  EXPECT_THAT(Error("{% filter upper %}{{ 'x' * 600 }}{{ 'x' * 600 }}{% endfilter %}", options),
              HasSubstr("limit"));
  EXPECT_THAT(Error("{% for x in [[1]] recursive %}{% if x is iterable %}{{ loop(x) }}"
                    "{% else %}{{ 'x' * 600 }}{{ 'x' * 600 }}{% endif %}{% endfor %}",
                    options),
              HasSubstr("limit"));
  for (const char* source :
       {"{{ '{:>999999999}'.format(1) }}", "{{ '%999999999s' % 'a' }}",
        "{{ '{:.999999999f}'.format(1.5) }}", "{{ '%.999999999d' % 1 }}",
        "{{ [1] | batch(999999999, 0) | list }}", "{{ [1] | slice(999999999) | list }}"}) {
    EXPECT_THAT(Error(source, options), HasSubstr("limit")) << source;
  }
}

TEST_F(ChatTemplateTest, TemplateKwargsAndSpecialTokens) {
  RenderOptions options;
  options.unk_token = "<unk>";
  options.template_kwargs_json =
      R"({"enable_thinking": false, "n": 3, "x": 1.5, "l": [null, "a"], "bos_token": "<B>"})";
  EXPECT_EQ(*Render("{{ enable_thinking }}|{{ n + 1 }}|{{ x }}|{{ l }}|{{ bos_token }}|"
                    "{{ unk_token }}|{{ pad_token is defined }}",
                    Conversation(), options),
            "False|4|1.5|[None, 'a']|<B>|<unk>|False");
  const std::pair<const char*, const char*> kBad[] = {
      {"{", "not valid JSON"},
      {"[1]", "must be a JSON object"},
      {R"({"messages": []})", "may not set 'messages'"},
      {R"({"tools": null})", "may not set 'tools'"},
      {R"({"documents": null})", "may not set 'documents'"},
      {R"({"add_generation_prompt": true})", "may not set 'add_generation_prompt'"},
      {R"({"big": 18446744073709551615})", "64 bits"},
  };
  for (const auto& [json, want] : kBad) {
    options.template_kwargs_json = json;
    EXPECT_THAT(Error("x", options), HasSubstr(want)) << json;
  }
  options.template_kwargs_json = "{\"a\": " + std::string(40, '[') + std::string(40, ']') + "}";
  EXPECT_THAT(Error("x", options), HasSubstr("deeper"));
  options.template_kwargs_json = "{\"a\": " + std::string(100000, '[') + "}";
  EXPECT_THAT(Error("x", options), HasSubstr("deeper"));
  // 32 levels are fine, and brackets inside strings (escaped quotes too) are text.
  options.template_kwargs_json = "{\"a\": " + std::string(31, '[') + std::string(31, ']') +
                                 ", \"s\": \"\\\"" + std::string(40, '[') + "\"}";
  EXPECT_EQ(*Render("{{ s | length }}", Conversation(), options), "41");
  options.template_kwargs_json.clear();
  options.tools_json = std::string(40, '[') + std::string(40, ']');
  EXPECT_THAT(Error("x", options), HasSubstr("tools nests deeper than 32 levels"));
  options.template_kwargs_json = "{\"a\": \"" + std::string(100, 'x') + "\"}";
  options.limits.max_string_bytes = 50;
  EXPECT_THAT(Error("x", options), HasSubstr("limit"));
}

TEST_F(ChatTemplateTest, DeepOrCircularValuesFailToPrint) {
  EXPECT_THAT(Error("{% set ns = namespace(x=1) %}{% set ns.self = ns %}{{ ns }}"),
              HasSubstr("nested too deeply"));
  EXPECT_THAT(Error("{% set ns = namespace(x=1) %}{% for i in range(1000) %}"
                    "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x | tojson }}"),
              HasSubstr("nested too deeply"));
  EXPECT_THAT(Error("{% set ns = namespace(x=1) %}{% set ns.self = ns %}{{ ns == ns.self }}"),
              StartsWith("unexpected success"));  // identity comparison: no recursion
}

TEST_F(ChatTemplateTest, StrftimeNowFormatsTheInjectedTimeInItsZone) {
  RenderOptions options;
  options.now = absl::FromCivil(absl::CivilSecond(2025, 12, 31, 23, 30, 0), absl::UTCTimeZone());
  options.time_zone = absl::FixedTimeZone(3600);  // already 2026 there
  EXPECT_EQ(*Render("{{ strftime_now('%d %b %Y %H:%M') }}", Conversation(), options),
            "01 Jan 2026 00:30");
  EXPECT_THAT(Error("{{ strftime_now(1) }}"), HasSubstr("must be str"));
  EXPECT_THAT(Error("{{ strftime_now('%c' * 100000) }}"), HasSubstr("limit"));
}

TEST_F(ChatTemplateTest, PaddingAndIndentingCannotBuildHugeStrings) {
  for (const char* source :
       {"{{ 'a'.ljust(1000000000) }}", "{{ 'a'.rjust(9223372036854775807, 'x') }}",
        "{{ 'a'.center(2000000) }}", "{{ 'a' | center(2000000) }}", "{{ '7'.zfill(5000000) }}",
        "{{ ('\t' * 1000).expandtabs(100000) }}", "{{ 'a\nb' | indent(2000000) }}",
        "{{ ('a\n' * 1000) | indent('x' * 2000) }}"}) {
    EXPECT_THAT(Error(source), HasSubstr("limit")) << source;
  }
}

TEST_F(ChatTemplateTest, ParseLimitsAreConfigurable) {
  chat_template::ParseOptions options;
  options.max_source_bytes = 10;
  EXPECT_FALSE(ChatTemplate::Parse("0123456789A", options).ok());
  options.max_nesting_depth = 3;
  EXPECT_FALSE(ChatTemplate::Parse("{{ ((((1)))) }}", options).ok());
  EXPECT_TRUE(ChatTemplate::Parse("{{ (1) }}", options).ok());
}

// Random bytes and random mutations of real templates: Parse and Render must return (text or
// InvalidArgument) without crashing, hanging or exhausting memory.
TEST_F(ChatTemplateTest, HostileInputsNeverCrash) {
  const std::string seeds[] = {kSmolLm2Template, kMistralTemplate,
                               "{% set ns = namespace(a=[]) %}{% for m in messages %}"
                               "{% set ns.a = ns.a + [m.content * 3] %}{% endfor %}"
                               "{{ ns.a | tojson(indent=2) }}{{ range(5) | join('-') }}"};
  const std::string alphabet = "{}%#-+()[]|.,:'\"~*/ \n\tabcxyzif for in set endfor endif 0123";
  // $PAGELLM_CHAT_TEMPLATE_FUZZ_ITERATIONS and _SEED run a longer or different campaign.
  const char* iterations_env = std::getenv("PAGELLM_CHAT_TEMPLATE_FUZZ_ITERATIONS");
  const char* seed_env = std::getenv("PAGELLM_CHAT_TEMPLATE_FUZZ_SEED");
  const int iterations = iterations_env != nullptr ? std::atoi(iterations_env) : 3000;
  std::mt19937 rng(seed_env != nullptr ? std::atoi(seed_env) : 12345);
  RenderOptions options;
  options.limits.max_steps = 20000;
  options.limits.max_output_bytes = 1 << 16;
  options.limits.max_string_bytes = 1 << 16;
  int rendered = 0;
  for (int iter = 0; iter < iterations; ++iter) {
    std::string source = seeds[iter % 3];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !source.empty(); ++e) {
      const size_t pos = rng() % source.size();
      switch (rng() % 4) {
        case 0:
          source.erase(pos, 1 + rng() % 6);
          break;
        case 1:
          source.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 2:
          source[pos] = alphabet[rng() % alphabet.size()];
          break;
        default:
          source.insert(pos, source.substr(rng() % source.size(), rng() % 20));
      }
    }
    if (iter % 10 == 0) {
      for (char& c : source) c = static_cast<char>(rng() % 128);
    }
    absl::StatusOr<std::unique_ptr<ChatTemplate>> tmpl = ChatTemplate::Parse(source);
    if (!tmpl.ok()) {
      ASSERT_EQ(tmpl.status().code(), absl::StatusCode::kInvalidArgument) << tmpl.status();
      continue;
    }
    absl::StatusOr<std::string> out = (*tmpl)->Render(Conversation(), options);
    if (out.ok()) {
      ++rendered;
    } else {
      ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    }
  }
  EXPECT_GT(rendered, iterations / 30);
}

TEST_F(ChatTemplateTest, ConcurrentRendersAreIndependent) {
  absl::StatusOr<std::unique_ptr<ChatTemplate>> tmpl = ChatTemplate::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "{{ m.content }}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(tmpl.ok());
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::vector<ChatMessage> messages(t + 1, ChatMessage{"user", std::to_string(t)});
        absl::StatusOr<std::string> out = (*tmpl)->Render(messages, {});
        const std::string want =
            std::string(t + 1, static_cast<char>('0' + t)) + std::to_string(t + 1);
        if (!out.ok() || *out != want) ++failures[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(failures, ::testing::Each(0));
}

}  // namespace
}  // namespace pagellm
