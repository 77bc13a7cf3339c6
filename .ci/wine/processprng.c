/*
 * bcryptprimitives.dll for Wine 8, which lacks it: the Go runtime (1.24 and
 * later) loads ProcessPrng from it at startup. It fills the buffer from
 * RtlGenRandom (advapi32!SystemFunction036), as Windows' own does.
 * Build: x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll processprng.c -ladvapi32
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T size)
{
	while (size > 0) {
		ULONG chunk = size > 0x40000000 ? 0x40000000 : (ULONG)size;
		if (!SystemFunction036(data, chunk))
			return FALSE;
		data += chunk;
		size -= chunk;
	}
	return TRUE;
}
