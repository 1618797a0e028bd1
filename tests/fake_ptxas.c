/*
 * fake_ptxas.c: a stand-in for the toolkit's ptxas program for the runtime tests on the fake
 * driver (ASTITCH_PTXAS points at it). Called as the runtime calls ptxas
 * (-arch=sm_NN -v -o CUBIN PTX), its "cubin" is the PTX it was given, NUL included, so the
 * fake driver (tests/fake_cuda.c), which reads PTX, loads it as before. With
 * FAKE_PTXAS_FAIL=text a module whose PTX holds `text` fails (exit 1) with an error naming it.
 * Each compile appends a line to the file FAKE_PTXAS_COUNT names, if set, so a test can count
 * them across processes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *s = NULL;
    long len = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (s = malloc((size_t)len + 1)) &&
        fread(s, 1, (size_t)len, f) == (size_t)len)
        s[*n = (size_t)len] = '\0';
    else {
        free(s);
        s = NULL;
    }
    if (f)
        fclose(f);
    return s;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *in = NULL;
    int arch = 0;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "-arch=sm_", 9) == 0)
            arch = atoi(argv[i] + 9);
        else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (argv[i][0] != '-')
            in = argv[i];
    }
    size_t n = 0;
    char *ptx = in ? read_file(in, &n) : NULL;
    if (!arch || !out || !ptx) {
        fprintf(stderr, "fake ptxas: usage: -arch=sm_NN -o CUBIN PTX\n");
        return 2;
    }
    const char *count = getenv("FAKE_PTXAS_COUNT");
    FILE *c = count && *count ? fopen(count, "a") : NULL;
    if (c) {
        fputs("compile\n", c);
        fclose(c);
    }
    const char *refuse = getenv("FAKE_PTXAS_FAIL");
    if (refuse && *refuse && strstr(ptx, refuse)) {
        fprintf(stderr, "fake ptxas error: '%s' is refused\n", refuse);
        return 1;
    }
    FILE *o = fopen(out, "wb");
    if (!o || fwrite(ptx, 1, n + 1, o) != n + 1 || fclose(o) != 0) {
        fprintf(stderr, "fake ptxas: cannot write %s\n", out);
        return 1;
    }
    printf("ptxas info    : fake, sm_%d\n", arch);
    free(ptx);
    return 0;
}
