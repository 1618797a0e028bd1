/*
 * npy.c: the .npy format (numpy's NEP 1) for astitch-run's inputs and outputs.
 *
 * Written: version 1.0, little-endian, C order, descr <f4 <f2 <i4 <i8 |b1, and <u2 holding the
 * raw bits of bf16 (numpy has no bf16). Read: versions 1.0, 2.0 and 3.0 with the same dtypes
 * (<V2 is also taken for bf16, as numpy writes ml_dtypes.bfloat16); the dtype and shape must be
 * exactly those of the parameter. The header is a Python dict literal; it is parsed strictly
 * (keys descr, fortran_order, shape, nothing else) since the file may be anything.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "astitch-run reads and writes little-endian .npy data in host order"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAX_HEADER (1 << 20)
#define NPY_MAX_RANK 64
#define NPY_MAX_RANK_TEXT "64"

static const char *npy_descr(astitch_dtype t)
{
    switch (t) {
    case ASTITCH_F32: return "<f4";
    case ASTITCH_F16: return "<f2";
    case ASTITCH_BF16: return "<u2";
    case ASTITCH_I32: return "<i4";
    case ASTITCH_I64: return "<i8";
    case ASTITCH_BOOL: return "|b1";
    default: return NULL;
    }
}

static bool descr_matches(astitch_dtype t, const char *descr)
{
    const char *want = npy_descr(t);
    if (want && strcmp(descr, want) == 0)
        return true;
    return t == ASTITCH_BF16 && strcmp(descr, "<V2") == 0;
}

typedef struct Header {
    const char *p, *end;
    char descr[32];
    bool has_descr, has_order, has_shape;
    bool fortran;
    int rank;
    int64_t dim[NPY_MAX_RANK];
    bool too_many_dims; /* the shape had more than NPY_MAX_RANK dimensions */
} Header;

static void skip_space(Header *h)
{
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
        h->p++;
}

static bool eat(Header *h, char c)
{
    skip_space(h);
    if (h->p < h->end && *h->p == c) {
        h->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes, copied into out (at most outlen - 1 bytes). */
static bool parse_string(Header *h, char *out, size_t outlen)
{
    skip_space(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
        return false;
    char q = *h->p++;
    size_t n = 0;
    while (h->p < h->end && *h->p != q) {
        if (*h->p == '\\' || n + 1 >= outlen)
            return false;
        out[n++] = *h->p++;
    }
    if (h->p >= h->end)
        return false;
    h->p++;
    out[n] = '\0';
    return true;
}

static bool parse_word(Header *h, const char *w)
{
    size_t n = strlen(w);
    skip_space(h);
    if ((size_t)(h->end - h->p) < n || memcmp(h->p, w, n) != 0)
        return false;
    h->p += n;
    return true;
}

static bool parse_shape(Header *h)
{
    if (!eat(h, '('))
        return false;
    h->rank = 0;
    for (;;) {
        if (eat(h, ')'))
            return true;
        if (h->rank == NPY_MAX_RANK) {
            h->too_many_dims = true;
            return false;
        }
        skip_space(h);
        int64_t v = 0;
        const char *start = h->p;
        while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return false;
            v = v * 10 + (*h->p++ - '0');
        }
        if (h->p == start)
            return false;
        h->dim[h->rank++] = v;
        if (!eat(h, ',')) /* "(3, 4)" and "(3,)" both end here or after the comma */
            return eat(h, ')');
    }
}

/* Parses the dict; on failure writes what is wrong into why. */
static bool parse_header(Header *h, const char **why)
{
    char key[32];
    if (!eat(h, '{')) {
        *why = "it does not start with '{'";
        return false;
    }
    while (!eat(h, '}')) {
        if (!parse_string(h, key, sizeof key) || !eat(h, ':')) {
            *why = "expected a quoted key and ':'";
            return false;
        }
        if (strcmp(key, "descr") == 0 && !h->has_descr) {
            if (!parse_string(h, h->descr, sizeof h->descr)) {
                *why = "'descr' is not a short string";
                return false;
            }
            h->has_descr = true;
        } else if (strcmp(key, "fortran_order") == 0 && !h->has_order) {
            if (parse_word(h, "True"))
                h->fortran = true;
            else if (!parse_word(h, "False")) {
                *why = "'fortran_order' is not True or False";
                return false;
            }
            h->has_order = true;
        } else if (strcmp(key, "shape") == 0 && !h->has_shape) {
            if (!parse_shape(h)) {
                *why = h->too_many_dims ? "'shape' has more than " NPY_MAX_RANK_TEXT " dimensions"
                                        : "'shape' is not a tuple of non-negative integers";
                return false;
            }
            h->has_shape = true;
        } else {
            *why = "unknown or repeated key";
            return false;
        }
        if (!eat(h, ',')) {
            if (!eat(h, '}')) {
                *why = "expected ',' or '}'";
                return false;
            }
            break;
        }
    }
    skip_space(h);
    if (h->p != h->end) {
        *why = "text after the dict";
        return false;
    }
    if (!h->has_descr || !h->has_order || !h->has_shape) {
        *why = "it lacks 'descr', 'fortran_order' or 'shape'";
        return false;
    }
    return true;
}

static void shape_text(char *buf, size_t len, int rank, const int64_t *dim)
{
    size_t at = (size_t)snprintf(buf, len, "(");
    for (int d = 0; d < rank && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, d ? ", " : "", dim[d]);
    if (at < len)
        snprintf(buf + at, len - at, "%s)", rank == 1 ? "," : "");
}

/* Reads the header of an open file; on success the file is at the first data byte. */
static tio_status read_header(FILE *f, const char *path, Header *h, char *err, size_t errlen)
{
    unsigned char pre[10];
    size_t got = fread(pre, 1, 8, f);
    if (got < 6 || memcmp(pre, NPY_MAGIC, 6) != 0) {
        snprintf(err, errlen, "%s: not a .npy file (no \\x93NUMPY magic)", path);
        return TIO_BAD_INPUT;
    }
    if (got < 8)
        goto truncated;
    int major = pre[6];
    size_t hlen;
    if (major == 1) {
        if (fread(pre + 8, 1, 2, f) != 2)
            goto truncated;
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (major == 2 || major == 3) {
        if (fread(pre + 8, 1, 2, f) != 2 || fread(pre, 1, 2, f) != 2)
            goto truncated;
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[0] << 16 |
               (size_t)pre[1] << 24;
    } else {
        snprintf(err, errlen, "%s: unsupported .npy version %d.%d", path, major, pre[7]);
        return TIO_BAD_INPUT;
    }
    if (hlen > NPY_MAX_HEADER) {
        snprintf(err, errlen, "%s: .npy header of %zu bytes is too long", path, hlen);
        return TIO_BAD_INPUT;
    }
    char *text = malloc(hlen + 1);
    if (!text) {
        snprintf(err, errlen, "%s: out of memory for the .npy header", path);
        return TIO_RUNTIME;
    }
    if (fread(text, 1, hlen, f) != hlen) {
        free(text);
        goto truncated;
    }
    h->p = text;
    h->end = text + hlen;
    const char *why = "";
    bool ok = memchr(text, '\0', hlen) == NULL && parse_header(h, &why);
    free(text);
    if (!ok) {
        snprintf(err, errlen, "%s: malformed .npy header: %s", path,
                 *why ? why : "it contains a NUL byte");
        return TIO_BAD_INPUT;
    }
    return TIO_OK;
truncated:
    snprintf(err, errlen, "%s: truncated .npy header", path);
    return TIO_BAD_INPUT;
}

static tio_status check_header(const Header *h, const char *path, const astitch_tensor_info *want,
                               char *err, size_t errlen)
{
    char a[256], b[256];
    if (!descr_matches(want->dtype, h->descr)) {
        snprintf(err, errlen, "%s: dtype '%s' does not match parameter '%s' of dtype %s "
                 "(expected '%s')", path, h->descr, want->name, astitch_dtype_name(want->dtype),
                 npy_descr(want->dtype));
        return TIO_BAD_INPUT;
    }
    if (h->fortran) {
        snprintf(err, errlen, "%s: Fortran-order arrays are not supported (save in C order)",
                 path);
        return TIO_BAD_INPUT;
    }
    bool same = h->rank == want->rank;
    for (int d = 0; same && d < h->rank; d++)
        same = h->dim[d] == want->dims[d];
    if (!same) {
        shape_text(a, sizeof a, h->rank, h->dim);
        snprintf(err, errlen, "%s: shape %s does not match parameter '%s' %s", path, a,
                 want->name, tio_type_str(b, sizeof b, want));
        return TIO_BAD_INPUT;
    }
    return TIO_OK;
}

tio_status tio_npy_read(const char *path, const astitch_tensor_info *want, void *data,
                        char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return TIO_BAD_INPUT;
    }
    Header h = {0};
    tio_status s = read_header(f, path, &h, err, errlen);
    if (s == TIO_OK)
        s = check_header(&h, path, want, err, errlen);
    if (s == TIO_OK) {
        size_t got = fread(data, 1, want->bytes, f);
        if (got != want->bytes) {
            snprintf(err, errlen, "%s: truncated: %zu of %zu data bytes", path, got,
                     want->bytes);
            s = TIO_BAD_INPUT;
        } else if (fgetc(f) != EOF) {
            snprintf(err, errlen, "%s: bytes follow the %zu data bytes", path, want->bytes);
            s = TIO_BAD_INPUT;
        }
    }
    for (int64_t i = 0; s == TIO_OK && want->dtype == ASTITCH_BOOL && i < want->elements; i++) {
        unsigned v = ((const unsigned char *)data)[i];
        if (v > 1) {
            snprintf(err, errlen, "%s: element %" PRId64 " is %u, not a bool (0 or 1)", path,
                     i, v);
            s = TIO_BAD_INPUT;
        }
    }
    fclose(f);
    return s;
}

tio_status tio_npy_write(const char *path, const astitch_tensor_info *t, const void *data,
                         char *err, size_t errlen)
{
    char shape[256], header[512];
    const char *descr = npy_descr(t->dtype);
    if (!descr) {
        snprintf(err, errlen, "%s: no .npy dtype for dtype %d", path, (int)t->dtype);
        return TIO_RUNTIME;
    }
    shape_text(shape, sizeof shape, t->rank, t->dims);
    int n = snprintf(header, sizeof header,
                     "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    /* pad with spaces so that magic, version, length and header end on a 64-byte boundary */
    size_t len = (size_t)n;
    size_t total = (10 + len + 1 + 63) / 64 * 64;
    size_t pad = total - 10 - len - 1;
    memset(header + len, ' ', pad);
    len += pad;
    header[len++] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                             (unsigned char)(len & 0xff), (unsigned char)(len >> 8)};

    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return TIO_RUNTIME;
    }
    bool ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre &&
              fwrite(header, 1, len, f) == len &&
              fwrite(data, 1, t->bytes, f) == t->bytes;
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(saved));
        return TIO_RUNTIME;
    }
    return TIO_OK;
}
