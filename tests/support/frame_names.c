/*
 * frame_names.c - see frame_names.h.
 */
#include "frame_names.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CLONES[] = {".isra.",     ".constprop.", ".part.",        ".cold",
                                     ".lto_priv.", ".localalias", ".specialized.", ".llvm."};

/* "<path>:<digits>" with no space: a source position token. */
static bool is_position(const char *tok, size_t len, char *file, size_t file_cap, unsigned *line) {
  size_t colon = len;
  while (colon > 0 && isdigit((unsigned char)tok[colon - 1]))
    colon--;
  if (colon == len || colon < 2 || tok[colon - 1] != ':' || memchr(tok, ' ', len)) return false;
  size_t n = colon - 1 < file_cap - 1 ? colon - 1 : file_cap - 1;
  memcpy(file, tok, n);
  file[n] = '\0';
  *line = (unsigned)strtoul(tok + colon, NULL, 10);
  return true;
}

bool frame_text_parse(const char *line, frame_text_t *out) {
  memset(out, 0, sizeof *out);
  size_t len = strcspn(line, "\n");
  int used = 0;
  char reason[64];
  if (sscanf(line, "%u <truncated: %63[^>]>", &out->index, reason) == 2) {
    out->truncated = true;
    snprintf(out->name, sizeof out->name, "%s", reason);
    return true;
  }
  if (sscanf(line, "%u %255s 0x%" SCNx64 " %n", &out->index, out->module, &out->pc, &used) < 3 ||
      used == 0)
    return false;
  const char *rest = line + used;
  size_t n = len - (size_t)used;
  if (n >= 9 && strncmp(rest, "[inline] ", 9) == 0) {
    out->is_inline = true;
    rest += 9;
    n -= 9;
  }
  const char *sp = n ? memrchr(rest, ' ', n) : NULL;
  if (sp &&
      is_position(sp + 1, n - (size_t)(sp + 1 - rest), out->file, sizeof out->file, &out->line))
    n = (size_t)(sp - rest);
  if (!out->is_inline) { /* "<name> + <offset>", or unnamed "<module>+0x<offset>" */
    const char *plus = NULL;
    for (const char *p = rest; p + 3 <= rest + n; p++)
      if (strncmp(p, " + ", 3) == 0) plus = p;
    size_t mod = strlen(out->module);
    if (!plus && n > mod + 3 && strncmp(rest, out->module, mod) == 0 &&
        strncmp(rest + mod, "+0x", 3) == 0) {
      out->unnamed = true;
      out->offset = strtoull(rest + mod + 3, NULL, 16);
    } else if (plus) {
      out->offset = strtoull(plus + 3, NULL, 10);
      n = (size_t)(plus - rest);
    } else {
      return false;
    }
  }
  if (n >= sizeof out->name) n = sizeof out->name - 1;
  memcpy(out->name, rest, n);
  out->name[n] = '\0';
  return true;
}

const char *frame_basename(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* ------------------------------------------------------------------------ */
/* Names                                                                     */
/* ------------------------------------------------------------------------ */

static void cut_clones(char *s) {
  for (size_t len = strlen(s); len > 0 && s[len - 1] == ']';) {
    char *open = strstr(s, " [clone .");
    if (!open) break;
    *open = '\0';
    len = strlen(s);
  }
  for (size_t i = 0; i < sizeof CLONES / sizeof CLONES[0]; i++) {
    char *p = strstr(s, CLONES[i]);
    if (p && p > s) *p = '\0';
  }
}

/* Index just past the bracket matching s[open] ('(' or '<'), or strlen. */
static size_t match(const char *s, size_t open) {
  char o = s[open], c = o == '(' ? ')' : '>';
  int depth = 0;
  for (size_t i = open; s[i]; i++) {
    if (s[i] == o) depth++;
    if (s[i] == c && --depth == 0) return i + 1;
  }
  return strlen(s);
}

/* "{lambda(...)#N}" and "<lambda(...)>" -> "{lambda}". */
static void lambdas(const char *in, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; in[i] && o + 1 < cap;) {
    bool brace = strncmp(in + i, "{lambda(", 8) == 0, angle = strncmp(in + i, "<lambda(", 8) == 0;
    if (brace || angle) {
      size_t end = match(in, i + 7);
      if (brace)
        while (in[end] && in[end] != '}')
          end++;
      if (in[end]) end++; /* the '}' or '>' */
      o += (size_t)snprintf(out + o, cap - o, "{lambda}");
      i = end;
      continue;
    }
    out[o++] = in[i++];
  }
  out[o < cap ? o : cap - 1] = '\0';
}

/* Every (...) group out, but the "()" of "operator()". */
static void no_parens(const char *in, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; in[i] && o + 2 < cap;) {
    if (in[i] == '(') {
      bool call_op = o >= 8 && strncmp(out + o - 8, "operator", 8) == 0 && in[i + 1] == ')';
      if (call_op) {
        out[o++] = '(';
        out[o++] = ')';
        i += 2;
      } else {
        i = match(in, i);
      }
      continue;
    }
    out[o++] = in[i++];
  }
  out[o] = '\0';
}

/* Every template argument list reduced to "<>" (operator<, operator<<,
   operator-> and friends kept as they are). */
static void no_template_args(const char *in, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; in[i] && o + 3 < cap;) {
    if (o >= 8 && strncmp(out + o - 8, "operator", 8) == 0 && strchr("<>=-", in[i])) {
      while (in[i] && strchr("<>=-", in[i]) && o + 3 < cap)
        out[o++] = in[i++];
      continue;
    }
    if (in[i] == '<') {
      out[o++] = '<';
      out[o++] = '>';
      i = match(in, i);
      continue;
    }
    out[o++] = in[i++];
  }
  out[o] = '\0';
}

static void cut_qualifiers(char *s) {
  static const char *const quals[] = {" const", " volatile", " &&", " &"};
  for (bool again = true; again;) {
    again = false;
    size_t len = strlen(s);
    for (size_t q = 0; q < 4; q++) {
      size_t n = strlen(quals[q]);
      if (len >= n && strcmp(s + len - n, quals[q]) == 0) {
        s[len - n] = '\0';
        again = true;
        break;
      }
    }
  }
}

/* Drop everything up to the last space outside template arguments: the
   return type of a demangled template function. */
static const char *no_return_type(const char *s) {
  const char *start = s;
  int depth = 0;
  for (const char *p = s; *p; p++) {
    if (*p == '<') depth++;
    if (*p == '>') depth--;
    if (*p == ' ' && depth == 0 && p[1]) start = p + 1;
  }
  return start;
}

/* "<module>+0x<hex>": the SDK's unnamed frame. */
static bool is_unnamed(const char *name) {
  const char *p = strstr(name, "+0x");
  return p && p > name && p[3] && strspn(p + 3, "0123456789abcdef") == strlen(p + 3) &&
         !memchr(name, ' ', (size_t)(p - name));
}

/* "name@VERSION" or "name@@VERSION" (not "name@plt"): the version cut. */
static void cut_version(char *s) {
  char *at = strchr(s, '@');
  if (at && at > s && strcmp(at, "@plt") != 0 && !strchr(at, ' ') && !strchr(at, '(')) *at = '\0';
}

void frame_name_norm(const char *name, char *out, size_t cap) {
  if (is_unnamed(name)) name = "??";
  char *a = malloc(FRAME_NAME_MAX), *b = malloc(FRAME_NAME_MAX);
  if (!a || !b) abort();
  snprintf(a, FRAME_NAME_MAX, "%s", name);
  cut_version(a);
  cut_clones(a);
  lambdas(a, b, FRAME_NAME_MAX);
  no_parens(b, a, FRAME_NAME_MAX);
  no_template_args(a, b, FRAME_NAME_MAX);
  snprintf(a, FRAME_NAME_MAX, "%s", b);
  cut_qualifiers(a);
  const char *s = no_return_type(a);
  if (strncmp(s, "__vdso_", 7) == 0) s += 7;
  if (strncmp(s, "__GI_", 5) == 0) s += 5;
  if (strncmp(s, "__libc_", 7) == 0) s += 7;
  while (*s == '_')
    s++;
  size_t o = 0;
  for (; *s && o + 1 < cap; s++)
    if (*s != ' ') out[o++] = *s;
  out[o] = '\0';
  free(a);
  free(b);
}
