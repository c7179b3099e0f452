/* A tinyspec conformance backend in C: a starting point to grow your own.

   It speaks the backend protocol (`tinyspec docs --out docs` writes docs/protocol.md) on
   stdin/stdout with inline arrays, so it reads and writes no array files: a request is one
   JSON line, its arrays are JSON integers (float elements as their IEEE bit patterns), and
   so is the answer. It evaluates tensor-level graphs of BUFFER, CONST, VCONST, ADD and MOD, with
   broadcasting, in every dtype.

     make                                                # or: cc -O2 -o backend backend.c -lm
     tinyspec conformance --backend cmd:./backend -k ADD
     tinyspec run --case ADD/float32 --backend cmd:./backend

   To add an op: declare it in `hello` (CAPABILITIES) and compute it in `node_value`. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "starter-c"
#define CAPABILITIES                                                                                        \
  "{\"ops\": {\"ADD\": [\"tensor\"], \"MOD\": [\"tensor\"], \"BUFFER\": [\"tensor\"], \"CONST\": [\"tensor\"], " \
  "\"VCONST\": [\"tensor\"]}, \"dtypes\": [\"bool\", \"int8\", \"int16\", \"int32\", \"int64\", \"uint8\", "    \
  "\"uint16\", \"uint32\", \"uint64\", \"float16\", \"bfloat16\", \"float32\", \"float64\", \"index\"], "       \
  "\"devices\": [\"*\"], \"validates\": false}"
#define MAX_RANK 64

/* ---------------------------------------------------------------- memory and refusals */
/* Everything one request needs comes from an arena freed after its answer, and a refusal
   (`fail`) jumps back to the request loop, which answers {"ok": false, "error": ...}. */
typedef struct Block { struct Block *next; } Block;
static Block *arena;
static jmp_buf refused;
static char why[1024];

static void *alloc(size_t n) {
  Block *b = malloc(sizeof(Block) + n + 16);
  if (!b) { fprintf(stderr, "out of memory\n"); exit(1); }
  b->next = arena; arena = b;
  return memset((char *)(b + 1), 0, n + 16);
}

static void free_all(void) {
  while (arena) { Block *next = arena->next; free(arena); arena = next; }
}

static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt); vsnprintf(why, sizeof why, fmt, ap); va_end(ap);
  longjmp(refused, 1);
}

/* ---------------------------------------------------------------- a tiny JSON reader */
enum { J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT };
typedef struct J { int type; char *text; int n; struct J **items; char **keys; } J;   /* text: a number's or string's */

static const char *p;   /* the reader's position */

static void skip(void) { while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++; }

static J *value(int depth);

static char *string(void) {
  size_t cap = 16, n = 0;
  char *s = alloc(cap);
  if (*p++ != '"') fail("JSON: expected a string");
  while (*p != '"') {
    unsigned c = (unsigned char)*p++;
    if (!c) fail("JSON: unterminated string");
    if (c == '\\') {
      c = (unsigned char)*p++;
      if (c == 'u') {
        unsigned u = (unsigned)strtoul((char[5]){p[0], p[1], p[2], p[3], 0}, NULL, 16);
        p += 4;
        if (u >= 0xD800 && u < 0xDC00 && p[0] == '\\' && p[1] == 'u') {   /* a surrogate pair */
          u = 0x10000 + ((u - 0xD800) << 10) + ((unsigned)strtoul((char[5]){p[2], p[3], p[4], p[5], 0}, NULL, 16) - 0xDC00);
          p += 6;
        }
        char buf[4]; int k = 0;   /* as UTF-8 */
        if (u < 0x80) buf[k++] = (char)u;
        else if (u < 0x800) { buf[k++] = (char)(0xC0 | u >> 6); buf[k++] = (char)(0x80 | (u & 63)); }
        else if (u < 0x10000) { buf[k++] = (char)(0xE0 | u >> 12); buf[k++] = (char)(0x80 | (u >> 6 & 63)); buf[k++] = (char)(0x80 | (u & 63)); }
        else { buf[k++] = (char)(0xF0 | u >> 18); buf[k++] = (char)(0x80 | (u >> 12 & 63)); buf[k++] = (char)(0x80 | (u >> 6 & 63)); buf[k++] = (char)(0x80 | (u & 63)); }
        for (int i = 0; i < k; i++) { if (n + 1 >= cap) { char *t = alloc(cap *= 2); memcpy(t, s, n); s = t; } s[n++] = buf[i]; }
        continue;
      }
      c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
    }
    if (n + 1 >= cap) { char *t = alloc(cap *= 2); memcpy(t, s, n); s = t; }
    s[n++] = (char)c;
  }
  p++;
  return s;
}

static J *list(int depth, int object) {   /* an array or an object: its items (and keys) */
  J *j = alloc(sizeof *j);
  int cap = 8;
  j->type = object ? J_OBJECT : J_ARRAY;
  j->items = alloc(cap * sizeof *j->items);
  j->keys = alloc(cap * sizeof *j->keys);
  p++; skip();
  if (*p == (object ? '}' : ']')) { p++; return j; }
  for (;;) {
    if (j->n == cap) {
      J **items = alloc(2 * cap * sizeof *items); char **keys = alloc(2 * cap * sizeof *keys);
      memcpy(items, j->items, cap * sizeof *items); memcpy(keys, j->keys, cap * sizeof *keys);
      j->items = items; j->keys = keys; cap *= 2;
    }
    skip();
    if (object) { j->keys[j->n] = string(); skip(); if (*p++ != ':') fail("JSON: expected ':'"); }
    j->items[j->n++] = value(depth + 1);
    skip();
    if (*p == ',') { p++; continue; }
    if (*p++ != (object ? '}' : ']')) fail("JSON: expected ',' or a closing bracket");
    return j;
  }
}

static J *value(int depth) {
  if (depth > 64) fail("JSON: nested too deep");
  skip();
  if (*p == '{' || *p == '[') return list(depth, *p == '{');
  J *j = alloc(sizeof *j);
  if (*p == '"') { j->type = J_STRING; j->text = string(); return j; }
  if (!strncmp(p, "null", 4)) { p += 4; j->type = J_NULL; return j; }
  if (!strncmp(p, "true", 4)) { p += 4; j->type = J_TRUE; return j; }
  if (!strncmp(p, "false", 5)) { p += 5; j->type = J_FALSE; return j; }
  const char *start = p;
  while (*p == '-' || *p == '+' || *p == '.' || *p == 'e' || *p == 'E' || (*p >= '0' && *p <= '9')) p++;
  if (p == start) fail("JSON: unexpected character '%c'", *p ? *p : '?');
  j->type = J_NUMBER;
  j->text = alloc((size_t)(p - start) + 1);
  memcpy(j->text, start, (size_t)(p - start));
  return j;
}

static J *parse(const char *text) {
  p = text;
  J *j = value(0);
  skip();
  if (*p) fail("JSON: text after the value");
  return j;
}

static J *get(J *j, const char *key) {   /* an object's member, or NULL */
  if (!j || j->type != J_OBJECT) return NULL;
  for (int i = 0; i < j->n; i++) if (!strcmp(j->keys[i], key)) return j->items[i];
  return NULL;
}

static J *need(J *j, const char *what) {
  if (!j) fail("%s: missing", what);
  return j;
}

static const char *text_of(J *j, const char *what) {
  if (!j || j->type != J_STRING) fail("%s: expected a string", what);
  return j->text;
}

static void write_string(const char *s) {   /* s as a JSON string */
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
    else putchar(*s);
  }
  putchar('"');
}

/* ---------------------------------------------------------------- dtypes and arrays */
/* Every element is held as the bits of its dtype (zero-extended into 64 bits): the value
   of an integer (two's complement), 0 or 1 for bool, the IEEE bit pattern of a float. */
typedef struct { const char *name; char cls; int bits, ebits, mbits; } DType;   /* cls: b(ool) i(nt) u(int) f(loat) */
static const DType DTYPES[] = {
  {"bool", 'b', 8, 0, 0}, {"int8", 'i', 8, 0, 0}, {"int16", 'i', 16, 0, 0}, {"int32", 'i', 32, 0, 0}, {"int64", 'i', 64, 0, 0},
  {"index", 'i', 64, 0, 0},
  {"uint8", 'u', 8, 0, 0}, {"uint16", 'u', 16, 0, 0}, {"uint32", 'u', 32, 0, 0}, {"uint64", 'u', 64, 0, 0},
  {"float16", 'f', 16, 5, 10}, {"bfloat16", 'f', 16, 8, 7}, {"float32", 'f', 32, 8, 23}, {"float64", 'f', 64, 11, 52},
};

static const DType *dtype(const char *name) {
  for (size_t i = 0; i < sizeof DTYPES / sizeof *DTYPES; i++) if (!strcmp(DTYPES[i].name, name)) return &DTYPES[i];
  fail("dtype %s is not implemented", name);
  return NULL;
}

typedef struct { const DType *dt; int rank; long long shape[MAX_RANK]; long long n; uint64_t *bits; } Array;

static Array *array(const DType *dt, int rank, const long long *shape) {
  Array *a = alloc(sizeof *a);
  a->dt = dt; a->rank = rank; a->n = 1;
  for (int i = 0; i < rank; i++) { a->shape[i] = shape[i]; a->n *= shape[i]; }
  a->bits = alloc((size_t)a->n * sizeof *a->bits);
  return a;
}

static uint64_t mask(const DType *dt) { return dt->bits == 64 ? ~0ull : (1ull << dt->bits) - 1; }

static int64_t as_int(const DType *dt, uint64_t b) {   /* an int's value (sign-extended) */
  if (dt->cls == 'i' && dt->bits < 64 && (b >> (dt->bits - 1) & 1)) b |= ~mask(dt);
  return (int64_t)b;
}

static double as_double(const DType *dt, uint64_t b) {   /* a float's value */
  if (dt->bits == 64) { double d; memcpy(&d, &b, 8); return d; }
  if (dt->bits == 32) { float f; uint32_t u = (uint32_t)b; memcpy(&f, &u, 4); return f; }
  int bias = (1 << (dt->ebits - 1)) - 1;
  uint64_t e = b >> dt->mbits & ((1u << dt->ebits) - 1), m = b & ((1ull << dt->mbits) - 1);
  double v = e == (1u << dt->ebits) - 1 ? (m ? NAN : INFINITY)
           : e == 0 ? ldexp((double)m, 1 - bias - dt->mbits) : ldexp((double)(m | 1ull << dt->mbits), (int)e - bias - dt->mbits);
  return b >> (dt->bits - 1) & 1 ? -v : v;
}

static uint64_t from_double(const DType *dt, double x) {
  /* x rounded to the dtype (to nearest, ties to even). A sum of two floats is exact in a
     double or far from a tie, so this one rounding gives the correctly rounded sum. */
  if (dt->bits == 64) { uint64_t b; memcpy(&b, &x, 8); return b; }
  if (dt->bits == 32) { float f = (float)x; uint32_t u; memcpy(&u, &f, 4); return u; }
  uint64_t sign = signbit(x) ? 1ull << (dt->bits - 1) : 0, top = (1u << dt->ebits) - 1;
  if (isnan(x)) return sign | top << dt->mbits | 1ull << (dt->mbits - 1);
  if (isinf(x)) return sign | top << dt->mbits;
  int bias = (1 << (dt->ebits - 1)) - 1, e;
  frexp(fabs(x), &e);
  int exp = e - 1 < 1 - bias ? 1 - bias : e - 1;           /* subnormals share the smallest exponent */
  uint64_t m = (uint64_t)rint(ldexp(fabs(x), dt->mbits - exp));   /* the significand in units of the last place */
  if (m >> (dt->mbits + 1)) { m >>= 1; exp++; }             /* rounding carried into the next binade */
  uint64_t field = m >> dt->mbits ? (uint64_t)(exp + bias) : 0;
  if (field >= top) return sign | top << dt->mbits;         /* overflow: infinity */
  return sign | field << dt->mbits | (m & ((1ull << dt->mbits) - 1));
}

static uint64_t parse_element(const DType *dt, J *v, const char *what) {   /* a CONST value: number, bool or "nan"/"inf"/"-inf" */
  if (v->type == J_TRUE || v->type == J_FALSE) return v->type == J_TRUE;
  if (v->type != J_NUMBER && v->type != J_STRING) fail("%s: expected a number", what);
  if (dt->cls == 'f') return from_double(dt, strtod(v->text, NULL));
  if (dt->cls == 'b') return strtod(v->text, NULL) != 0;
  if (strpbrk(v->text, ".eE")) return (uint64_t)(int64_t)strtod(v->text, NULL) & mask(dt);
  return (v->text[0] == '-' ? (uint64_t)strtoll(v->text, NULL, 10) : strtoull(v->text, NULL, 10)) & mask(dt);
}

/* An inline array: {"dtype": ..., "shape": [...], "data": [integers]}. */
static Array *read_array(J *j, const char *what) {
  J *shape = get(j, "shape"), *data = get(j, "data");
  if (!shape || shape->type != J_ARRAY || !data || data->type != J_ARRAY) fail("%s: not an inline array", what);
  if (shape->n > MAX_RANK) fail("%s: rank over %d", what, MAX_RANK);
  long long dims[MAX_RANK];
  for (int i = 0; i < shape->n; i++) dims[i] = strtoll(shape->items[i]->text, NULL, 10);
  Array *a = array(dtype(text_of(get(j, "dtype"), what)), shape->n, dims);
  if (a->n != data->n) fail("%s: %d elements for shape of %lld", what, data->n, a->n);
  for (long long i = 0; i < a->n; i++) {
    const char *t = data->items[i]->text;
    a->bits[i] = (t[0] == '-' ? (uint64_t)strtoll(t, NULL, 10) : strtoull(t, NULL, 10)) & mask(a->dt);
  }
  return a;
}

static void write_array(const Array *a) {
  printf("{\"dtype\": \"%s\", \"shape\": [", a->dt->name);
  for (int i = 0; i < a->rank; i++) printf(i ? ", %lld" : "%lld", a->shape[i]);
  printf("], \"data\": [");
  for (long long i = 0; i < a->n; i++) {
    if (a->dt->cls == 'i') printf(i ? ",%lld" : "%lld", (long long)as_int(a->dt, a->bits[i]));
    else printf(i ? ",%llu" : "%llu", (unsigned long long)a->bits[i]);
  }
  printf("]}");
}

/* ---------------------------------------------------------------- the ops */
typedef uint64_t (*Binary)(const DType *dt, uint64_t a, uint64_t b);

static uint64_t add(const DType *dt, uint64_t a, uint64_t b) {   /* integers wrap (two's complement) */
  if (dt->cls == 'f') return from_double(dt, as_double(dt, a) + as_double(dt, b));
  return (a + b) & mask(dt);
}

static uint64_t mod(const DType *dt, uint64_t a, uint64_t b) {   /* the sign of the divisor; a mod 0 = a */
  if (dt->cls == 'f' || dt->cls == 'b') fail("MOD of %s is not defined", dt->name);
  if (b == 0) return a;
  if (dt->cls == 'u') return a % b;
  int64_t x = as_int(dt, a), y = as_int(dt, b);
  if (y == -1) return 0;   /* (MIN mod -1 would trap in C) */
  int64_t r = x % y;
  if (r != 0 && (r < 0) != (y < 0)) r += y;
  return (uint64_t)r & mask(dt);
}

/* a op b with numpy-style broadcasting (right-aligned dims equal or 1) */
static Array *broadcast(Binary f, const Array *a, const Array *b) {
  if (!a || !b) fail("a binary op needs two value sources");
  if (a->dt != b->dt) fail("sources of dtypes %s and %s", a->dt->name, b->dt->name);
  int rank = a->rank > b->rank ? a->rank : b->rank;
  long long shape[MAX_RANK], sa[MAX_RANK], sb[MAX_RANK];   /* output shape, and each source's strides (0: broadcast) */
  long long ka = 1, kb = 1;
  for (int i = rank - 1; i >= 0; i--) {
    int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
    long long da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1) fail("shapes do not broadcast");
    shape[i] = da == 1 ? db : da;
    sa[i] = da == 1 ? 0 : ka; sb[i] = db == 1 ? 0 : kb;
    ka *= da; kb *= db;
  }
  Array *out = array(a->dt, rank, shape);
  for (long long k = 0; k < out->n; k++) {
    long long rest = k, ia = 0, ib = 0;
    for (int i = rank - 1; i >= 0; i--) { long long d = rest % shape[i]; rest /= shape[i]; ia += d * sa[i]; ib += d * sb[i]; }
    out->bits[k] = f(a->dt, a->bits[ia], b->bits[ib]);
  }
  return out;
}

/* ---------------------------------------------------------------- evaluating a graph */
static Array *node_value(J *node, Array **values, J *inputs) {
  const char *op = text_of(get(node, "op"), "node op");
  J *src = get(node, "src"), *arg = get(node, "arg");
  Array *s[2] = {0, 0};
  for (int i = 0; src && i < src->n && i < 2; i++) s[i] = values[strtol(src->items[i]->text, NULL, 10)];
  if (!strcmp(op, "CONST")) {
    Array *a = array(dtype(text_of(get(arg, "dtype"), "CONST dtype")), 0, NULL);
    a->bits[0] = parse_element(a->dt, get(arg, "value"), "CONST value");
    return a;
  }
  if (!strcmp(op, "VCONST")) {
    J *vals = need(get(arg, "values"), "VCONST values");
    long long n = vals->n;
    Array *a = array(dtype(text_of(get(arg, "dtype"), "VCONST dtype")), 1, &n);
    for (int i = 0; i < vals->n; i++) a->bits[i] = parse_element(a->dt, vals->items[i], "VCONST value");
    return a;
  }
  if (!strcmp(op, "BUFFER")) {   /* its input: arg.name, else buf{slot} */
    char name[160];
    J *given = get(arg, "name");
    if (given) snprintf(name, sizeof name, "%s", text_of(given, "BUFFER name"));
    else snprintf(name, sizeof name, "buf%s", need(get(arg, "slot"), "BUFFER slot")->text);
    Array *in = read_array(need(get(inputs, name), name), name);
    if (in->dt != dtype(text_of(get(arg, "dtype"), "BUFFER dtype"))) fail("input %s has dtype %s", name, in->dt->name);
    if (!s[0]) fail("BUFFER needs its shape operand");
    long long n = 1;   /* the shape operand: a ()- or (k,)-shaped index constant */
    for (long long i = 0; i < s[0]->n; i++) n *= (long long)s[0]->bits[i];
    if (n != in->n) fail("input %s has %lld elements, its BUFFER %lld", name, in->n, n);
    in->rank = (int)s[0]->n;
    for (int i = 0; i < in->rank; i++) in->shape[i] = (long long)s[0]->bits[i];
    return in;
  }
  if (!strcmp(op, "ADD")) return broadcast(add, s[0], s[1]);
  if (!strcmp(op, "MOD")) return broadcast(mod, s[0], s[1]);
  fail("op %s is not implemented", op);
  return NULL;
}

/* The outputs: out{k} for the k-th root (default: the last node). */
static void run(J *msg) {
  FILE *f = fopen(text_of(get(msg, "graph"), "graph"), "rb");
  if (!f) fail("cannot open the graph file");
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = alloc((size_t)size + 1);
  size_t got = fread(text, 1, (size_t)size, f);
  fclose(f);
  text[got] = 0;
  J *doc = parse(text), *nodes = need(doc->type == J_ARRAY ? doc : get(doc, "nodes"), "graph nodes"), *roots = get(doc, "roots");
  Array **values = alloc((size_t)nodes->n * sizeof *values);
  for (int i = 0; i < nodes->n; i++) values[i] = node_value(nodes->items[i], values, get(msg, "inputs"));
  printf("{\"id\": ");
  write_string(text_of(get(msg, "id"), "id"));
  printf(", \"ok\": true, \"outputs\": {");
  int n = roots ? roots->n : 1;
  for (int k = 0; k < n; k++) {
    printf(k ? ", \"out%d\": " : "\"out%d\": ", k);
    write_array(values[roots ? strtol(roots->items[k]->text, NULL, 10) : nodes->n - 1]);
  }
  printf("}}\n");
}

/* ---------------------------------------------------------------- the request loop */
static void answer_error(J *msg) {
  J *id = msg ? get(msg, "id") : NULL;
  printf("{");
  if (id && id->type == J_STRING) { printf("\"id\": "); write_string(id->text); printf(", "); }
  printf("\"ok\": false, \"error\": ");
  write_string(why);
  printf("}\n");
}

int main(void) {
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, stdin) > 0) {
    J *volatile msg = NULL;
    if (setjmp(refused)) answer_error(msg);
    else {
      msg = parse(line);
      const char *cmd = text_of(get(msg, "cmd"), "cmd");
      if (!strcmp(cmd, "quit")) break;
      if (!strcmp(cmd, "hello")) {
        /* arrays travel inline: the runner must offer that encoding */
        J *offered = get(msg, "arrays");
        int inline_ok = 0;
        for (int i = 0; offered && i < offered->n; i++) inline_ok |= !strcmp(offered->items[i]->text, "inline");
        if (!inline_ok) fail("this backend reads arrays inline only");
        printf("{\"ok\": true, \"protocol\": 1, \"name\": \"%s\", \"arrays\": \"inline\", \"manifest\": \"manifest.yaml\", "
               "\"capabilities\": %s}\n", NAME, CAPABILITIES);
      } else if (!strcmp(cmd, "run")) run(msg);
      else fail("unknown cmd %s", cmd);
    }
    fflush(stdout);
    free_all();
  }
  free(line);
  return 0;
}
