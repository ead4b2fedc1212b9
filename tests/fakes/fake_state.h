/* The key=value state file shared by the fake vendor libraries (NVML, AMD SMI).
 *
 * Before including: define FAKE_STATE_ENV (the environment variable naming the file) and
 * include <stdio.h>, <stdlib.h>, <string.h>, <unistd.h>. The store is process-global: callers
 * hold their own lock around load/get/set/save.
 */
#ifndef VOLTPACK_FAKE_STATE_H
#define VOLTPACK_FAKE_STATE_H

#define MAX_ENTRIES 4096
#define KEY_LEN 96
#define VAL_LEN 128

static char keys[MAX_ENTRIES][KEY_LEN];
static char vals[MAX_ENTRIES][VAL_LEN];
static int entries;

/* strcpy that truncates to the destination's size. */
static void copy(char *dst, size_t size, const char *src) {
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ---- the key=value store ------------------------------------------------------------ */

static int load_state(void) {
    const char *path = getenv(FAKE_STATE_ENV);
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[KEY_LEN + VAL_LEN + 4];
    entries = 0;
    if (!f) return -1;
    while (entries < MAX_ENTRIES && fgets(line, sizeof line, f)) {
        char *eq = strchr(line, '=');
        if (line[0] == '#' || !eq) continue;
        *eq = '\0';
        eq[1 + strcspn(eq + 1, "\r\n")] = '\0';
        copy(keys[entries], KEY_LEN, line);
        copy(vals[entries], VAL_LEN, eq + 1);
        entries++;
    }
    fclose(f);
    return 0;
}

static int save_state(void) {
    const char *path = getenv(FAKE_STATE_ENV);
    char tmp[4096];
    FILE *f;
    if (!path) return -1;
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    f = fopen(tmp, "w");
    if (!f) return -1;
    for (int i = 0; i < entries; i++) fprintf(f, "%s=%s\n", keys[i], vals[i]);
    fclose(f);
    return rename(tmp, path);
}

static const char *get(const char *key) {
    for (int i = 0; i < entries; i++)
        if (strcmp(keys[i], key) == 0) return vals[i];
    return NULL;
}

static void set(const char *key, const char *val) {
    for (int i = 0; i < entries; i++)
        if (strcmp(keys[i], key) == 0) { copy(vals[i], VAL_LEN, val); return; }
    if (entries < MAX_ENTRIES) {
        copy(keys[entries], KEY_LEN, key);
        copy(vals[entries], VAL_LEN, val);
        entries++;
    }
}

#endif
