/*
 * crc32c.c - CRC-32C with the SSE4.2 instruction or slicing-by-8 tables (see
 * crc32c.h; other CPUs than x86_64 use the tables). Any thread: the tables and the CPU check are
 * set up once under pthread_once.
 */
#include "sdk/base/crc32c.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <pthread.h>
#include <string.h>

#define CRC32C_POLY 0x82F63B78u /* 0x1EDC6F41 reflected */

static uint32_t g_table[8][256];
static bool g_hw;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void crc32c_init(void);
static uint32_t crc32c_sw_raw(uint32_t crc, const uint8_t *p, size_t len);
static uint32_t crc32c_hw_raw(uint32_t crc, const uint8_t *p, size_t len);

uint32_t perf__crc32c(uint32_t crc, const void *data, size_t len) {
  pthread_once(&g_once, crc32c_init);
  const uint8_t *p = data;
  if (g_hw) return ~crc32c_hw_raw(~crc, p, len);
  return ~crc32c_sw_raw(~crc, p, len);
}

uint32_t perf__crc32c_sw(uint32_t crc, const void *data, size_t len) {
  pthread_once(&g_once, crc32c_init);
  return ~crc32c_sw_raw(~crc, data, len);
}

bool perf__crc32c_hw(void) {
  pthread_once(&g_once, crc32c_init);
  return g_hw;
}

static void crc32c_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1)));
    g_table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++)
      g_table[t][i] = (g_table[t - 1][i] >> 8) ^ g_table[0][g_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
  unsigned a, b, c, d;
  g_hw = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
#endif
}

/* Slicing-by-8: eight bytes per step through eight tables (x86_64 and
   aarch64 Linux are little endian, so the low byte of the loaded word is the first byte). */
static uint32_t crc32c_sw_raw(uint32_t crc, const uint8_t *p, size_t len) {
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    w ^= crc;
    crc = g_table[7][w & 0xff] ^ g_table[6][(w >> 8) & 0xff] ^ g_table[5][(w >> 16) & 0xff] ^
          g_table[4][(w >> 24) & 0xff] ^ g_table[3][(w >> 32) & 0xff] ^
          g_table[2][(w >> 40) & 0xff] ^ g_table[1][(w >> 48) & 0xff] ^ g_table[0][w >> 56];
    p += 8;
    len -= 8;
  }
  while (len--)
    crc = (crc >> 8) ^ g_table[0][(crc ^ *p++) & 0xff];
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw_raw(uint32_t crc, const uint8_t *p,
                                                                size_t len) {
  uint64_t c = crc;
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c = __builtin_ia32_crc32di(c, w);
    p += 8;
    len -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (len--)
    c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
#else
static uint32_t crc32c_hw_raw(uint32_t crc, const uint8_t *p, size_t len) {
  return crc32c_sw_raw(crc, p, len); /* never called: g_hw stays false */
}
#endif
