/* The header reader of ORT's profile traces (ortlab.engine.tracescan builds and loads it).
 *
 * ORT 1.31 writes a trace as a JSON array with one event per line, every line's header in one
 * layout, then the event's args (90 % of its bytes: memory counters, thread statistics):
 *
 *   [
 *   {"cat" : "Node","pid" :1,"tid" :2,"dur" :37,"ts" :48,"ph" : "X","name" :"n","args" : {...}},
 *   ...
 *   ]
 *
 * ortlab_scan reads each header (cat, tid, dur, ts, name), codes every distinct cat and name
 * string in order of first appearance (a hash table, each hit compared byte for byte), and
 * finds where each line's args start and end with memchr, without tokenizing them: the args of
 * the few events ortlab reads are decoded in full by msgspec. Any line that is not in exactly
 * this layout (escapes or control characters in a string, a number that is not a plain
 * integer, a missing closing bracket, another key order) stops the scan with a negative
 * result, and the caller decodes the whole trace with msgspec instead: the fast path reads only
 * what it can read exactly.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LITERAL(s, end, text) literal((s), (end), (text), sizeof(text) - 1)

static const uint8_t *literal(const uint8_t *s, const uint8_t *end, const char *text, size_t len) {
    if (s == NULL || (size_t)(end - s) < len || memcmp(s, text, len) != 0) return NULL;
    return s + len;
}

/* a plain non-negative integer of at most 18 digits (no sign, fraction or exponent) */
static const uint8_t *integer(const uint8_t *s, const uint8_t *end, int64_t *out) {
    if (s == NULL) return NULL;
    const uint8_t *start = s;
    int64_t value = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        if (s - start == 18) return NULL;
        value = value * 10 + (*s++ - '0');
    }
    if (s == start || (s < end && (*s == '.' || *s == 'e' || *s == 'E'))) return NULL;
    *out = value;
    return s;
}

/* the end of a string's bytes that need no unescaping: NULL at a backslash or control byte */
static const uint8_t *plain_string(const uint8_t *s, const uint8_t *end) {
    if (s == NULL) return NULL;
    while (s < end && *s != '"') {
        if (*s == '\\' || *s < 0x20) return NULL;
        s++;
    }
    return s < end ? s : NULL;
}

static int blank(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

typedef struct {
    uint64_t *hash;
    int32_t *code; /* -1: empty slot */
    int64_t size;  /* a power of two */
} table;

static int grow(table *t) {
    int64_t size = t->size ? t->size * 2 : 1024;
    uint64_t *hash = malloc(sizeof(uint64_t) * (size_t)size);
    int32_t *code = malloc(sizeof(int32_t) * (size_t)size);
    if (hash == NULL || code == NULL) {
        free(hash);
        free(code);
        return -1;
    }
    for (int64_t i = 0; i < size; i++) code[i] = -1;
    for (int64_t i = 0; i < t->size; i++) {
        if (t->code[i] < 0) continue;
        int64_t j = (int64_t)(t->hash[i] & (uint64_t)(size - 1));
        while (code[j] >= 0) j = (j + 1) & (size - 1);
        hash[j] = t->hash[i];
        code[j] = t->code[i];
    }
    free(t->hash);
    free(t->code);
    t->hash = hash;
    t->code = code;
    t->size = size;
    return 0;
}

/* the code of the string buf[start, end): its index among the distinct strings (offsets and
 * lengths in `at` / `len`, room for 2 * cap), which it joins when new; -1 when the table
 * cannot grow */
static int64_t code_of(table *t, const uint8_t *buf, const uint8_t *start, const uint8_t *end,
                       int64_t *at, int32_t *len, int64_t *count, int64_t cap) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const uint8_t *p = start; p < end; p++) h = (h ^ *p) * 1099511628211ULL;
    if (*count * 2 >= t->size && grow(t) < 0) return -1;
    int64_t n = end - start;
    int64_t j = (int64_t)(h & (uint64_t)(t->size - 1));
    while (t->code[j] >= 0) {
        int32_t c = t->code[j];
        if (t->hash[j] == h && len[c] == n && memcmp(buf + at[c], start, (size_t)n) == 0) return c;
        j = (j + 1) & (t->size - 1);
    }
    if (*count >= 2 * cap || n > INT32_MAX) return -1;
    t->hash[j] = h;
    t->code[j] = (int32_t)*count;
    at[*count] = start - buf;
    len[*count] = (int32_t)n;
    return (*count)++;
}

/* Reads the trace buf[0, n). Per event (up to cap): the codes of its name and cat, its tid, dur
 * and ts, and the offsets [args_at, args_end) of its args object. The distinct strings go to
 * str_at / str_len (*n_strings of them; room for 2 * cap, a name and a cat per event). Returns
 * the number of events, or a negative number where the trace is not in ORT's one-event-per-line
 * layout (-1: no "[" line, -2: text after "]", -3: more events than cap, -4: a header not in the
 * layout, -5: no line end, -6: a line not ending in "}}" or "}},", -7: out of memory). */
int64_t ortlab_scan(const uint8_t *buf, int64_t n, int64_t cap, int32_t *name, int32_t *cat,
                    int64_t *tid, int64_t *dur, int64_t *ts, int64_t *args_at, int64_t *args_end,
                    int64_t *str_at, int32_t *str_len, int64_t *n_strings) {
    const uint8_t *s = buf, *end = buf + n;
    table t = {NULL, NULL, 0};
    int64_t k = 0, result = -1;
    *n_strings = 0;
    while (s < end && blank(*s)) s++;
    s = LITERAL(s, end, "[");
    if (s != NULL && s < end && *s == '\r') s++;
    s = LITERAL(s, end, "\n");
    if (s == NULL) goto done;
    for (;;) {
        if (s < end && *s == ']') {
            for (s++; s < end && blank(*s); s++) {
            }
            result = s == end ? k : -2;
            break;
        }
        if (k >= cap) {
            result = -3;
            break;
        }
        int64_t pid;
        const uint8_t *cat_at = LITERAL(s, end, "{\"cat\" : \"");
        const uint8_t *cat_end = plain_string(cat_at, end);
        s = integer(LITERAL(cat_end, end, "\",\"pid\" :"), end, &pid);
        s = integer(LITERAL(s, end, ",\"tid\" :"), end, &tid[k]);
        s = integer(LITERAL(s, end, ",\"dur\" :"), end, &dur[k]);
        s = integer(LITERAL(s, end, ",\"ts\" :"), end, &ts[k]);
        const uint8_t *name_at = LITERAL(s, end, ",\"ph\" : \"X\",\"name\" :\"");
        const uint8_t *name_end = plain_string(name_at, end);
        s = LITERAL(name_end, end, "\",\"args\" : {");
        if (s == NULL) {
            result = -4;
            break;
        }
        int64_t c = code_of(&t, buf, cat_at, cat_end, str_at, str_len, n_strings, cap);
        int64_t m = c < 0 ? -1
                          : code_of(&t, buf, name_at, name_end, str_at, str_len, n_strings, cap);
        if (m < 0) {
            result = -7;
            break;
        }
        cat[k] = (int32_t)c;
        name[k] = (int32_t)m;
        args_at[k] = s - 1 - buf;
        const uint8_t *line_end = memchr(s, '\n', (size_t)(end - s));
        if (line_end == NULL) {
            result = -5;
            break;
        }
        const uint8_t *e = line_end - 1;
        if (e > s && *e == '\r') e--;
        if (e > s && *e == ',') e--;
        if (!(e > s && *e == '}' && e[-1] == '}')) {
            result = -6;
            break;
        }
        args_end[k] = e - buf; /* the args object ends before the event's closing brace */
        k++;
        s = line_end + 1;
    }
done:
    free(t.hash);
    free(t.code);
    return result;
}
