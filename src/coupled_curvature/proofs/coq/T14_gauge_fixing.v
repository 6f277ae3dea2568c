(* T14 (gauge fixing) for attention's query/key symmetry W_Q -> W_Q A, W_K -> W_K A⁻ᵀ, over any real
   closed field, without the spectral theorem.  Its statements are pinned with T13's (statements/T13.txt),
   since T14 has no registry entry.
   - `balanced_unique`: X, Z : d×h with X of full column rank (`row_free X^T`), A : h×h invertible.  If
     (X, Z) is balanced (XᵀX = ZᵀZ) and (XA, ZA⁻ᵀ) is balanced too, then AᵀA = 1: the balanced
     representative is unique up to an orthogonal factor.  Proof: S = XᵀX, P = AAᵀ, Q = A⁻ᵀA⁻¹ = P⁻¹,
     Y = P − 1.  The two balances give PSP = S, hence PS = SQ, tr(SP²) = tr S and tr(SQ) = tr(SP).
     ‖XY‖²_F = tr(SY²) = 2 tr S − 2 tr(SP) and ‖XYA⁻ᵀ‖²_F = tr(SYQY) = 2 tr(SP) − 2 tr S.  Both are sums
     of squares (`tr_gram_ge0`) and they add to 0, so XY = 0 (`tr_gram_eq0`), and full column rank
     gives Y = 0.
   - `gauge_fixed_D_invariant`: under the same hypotheses, with T4 (T13's row-block lemmas), D of every
     query row block (moved by Aᵀ) and of every key row block (moved by A⁻¹) is unchanged for every
     w ≠ 0, g ≠ 0 and symmetric H: the gauge-fixed D does not see the rest of the group.
   - `T14_instance`: X = Z = diag(1, 2) (W_Q = W_K), A = the swap [0 1; 1 0]: full column rank,
     invertible, balanced before and after, and AᵀA = 1; negative control: A = 2·1 breaks the balance
     ((2X)ᵀ(2X) ≠ (X/2)ᵀ(X/2)), so the second hypothesis is not empty. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From CoupledCurvature Require Import Defs Common T04_invariance_group T13_attention.

Section Gauge.
Variable R : rcfType.

Lemma tr_gram_sum m n (M : 'M[R]_(m, n)) : \tr (M^T *m M) = \sum_i \sum_k M k i ^+ 2.
Proof. by apply: eq_bigr => i _; rewrite mxE; apply: eq_bigr => k _; rewrite mxE expr2. Qed.

Lemma tr_gram_ge0 m n (M : 'M[R]_(m, n)) : 0 <= \tr (M^T *m M).
Proof. by rewrite tr_gram_sum; apply: sumr_ge0 => i _; apply: sumr_ge0 => k _; exact: sqr_ge0. Qed.

Lemma tr_gram_eq0 m n (M : 'M[R]_(m, n)) : \tr (M^T *m M) = 0 -> M = 0.
Proof.
rewrite tr_gram_sum => h0; apply/matrixP => k i; rewrite mxE.
have hi : \sum_k M k i ^+ 2 = 0.
  move: h0 => /psumr_eq0P; apply=> // j _; apply: sumr_ge0 => l _; exact: sqr_ge0.
move: hi => /psumr_eq0P => /(_ (fun l _ => sqr_ge0 (M l i)) k isT) /eqP.
by rewrite sqrf_eq0 => /eqP.
Qed.

(* P S P = S from the two balance conditions, with P = A Aᵀ and S = XᵀX *)
Lemma balanced_PSP d h (X Z : 'M[R]_(d, h)) (A : 'M[R]_h) : A \in unitmx ->
  X^T *m X = Z^T *m Z ->
  (X *m A)^T *m (X *m A) = (Z *m (invmx A)^T)^T *m (Z *m (invmx A)^T) ->
  (A *m A^T) *m (X^T *m X) *m (A *m A^T) = X^T *m X.
Proof.
move=> uA hb h2.
have {}h2 : A^T *m (X^T *m X) *m A = invmx A *m (X^T *m X) *m (invmx A)^T.
  rewrite [in RHS]hb !mulmxA; move: h2; rewrite !trmx_mul trmxK !mulmxA; exact: id.
have -> : A *m A^T *m (X^T *m X) *m (A *m A^T) = A *m (A^T *m (X^T *m X) *m A) *m A^T.
  by rewrite !mulmxA.
rewrite h2 !mulmxA mulmxV // mul1mx -!mulmxA -trmx_mul mulmxV // trmx1 mulmx1.
by [].
Qed.

Theorem balanced_unique d h (X Z : 'M[R]_(d, h)) (A : 'M[R]_h) :
  row_free X^T -> A \in unitmx ->
  X^T *m X = Z^T *m Z ->
  (X *m A)^T *m (X *m A) = (Z *m (invmx A)^T)^T *m (Z *m (invmx A)^T) ->
  A^T *m A = 1%:M.
Proof.
move=> fX uA hb h2; have hPSP := balanced_PSP uA hb h2.
have PQ : (A *m A^T) *m ((invmx A)^T *m invmx A) = 1%:M.
  by rewrite !mulmxA -(mulmxA A) -trmx_mul mulVmx // trmx1 mulmx1 mulmxV.
have PT : (A *m A^T)^T = A *m A^T by rewrite trmx_mul trmxK.
have ST : (X^T *m X)^T = X^T *m X by rewrite trmx_mul trmxK.
apply: mulmx1C.
move: hPSP ST; move hS: (X^T *m X) => S hPSP ST.
move: hPSP PQ PT; move: (A *m A^T) => P hPSP PQ PT.
move: PQ; move hQ: ((invmx A)^T *m invmx A) => Q PQ.
have QP : Q *m P = 1%:M by exact: mulmx1C.
(* P S = S Q *)
have PS : P *m S = S *m Q by rewrite -[in RHS]hPSP -!mulmxA PQ mulmx1.
have E1 : \tr (S *m P *m P) = \tr S by rewrite mxtrace_mulC mulmxA hPSP.
have E2 : \tr (S *m Q) = \tr (S *m P) by rewrite -PS mxtrace_mulC.
pose Y := P - 1%:M.
have YT : Y^T = Y by rewrite /Y linearB /= PT trmx1.
have F1 : \tr ((X *m Y)^T *m (X *m Y)) = 2%:R * \tr S - 2%:R * \tr (S *m P).
  rewrite trmx_mul YT -mulmxA mxtrace_mulC !mulmxA hS /Y.
  rewrite !(mulmxBr, mulmxBl, mulmx1, mul1mx) !raddfB /= E1.
  set a := \tr S; set b := \tr (S *m P); ring.
have F2 : \tr ((X *m Y *m (invmx A)^T)^T *m (X *m Y *m (invmx A)^T))
          = 2%:R * \tr (S *m P) - 2%:R * \tr S.
  rewrite !trmx_mul trmxK YT !mulmxA mxtrace_mulC !mulmxA hQ.
  rewrite -(mulmxA (Q *m Y) X^T X) hS /Y.
  rewrite !(mulmxBr, mulmxBl, mulmx1, mul1mx) QP mul1mx.
  have E3 : \tr (Q *m S *m P) = \tr S by rewrite mxtrace_mulC mulmxA PQ mul1mx.
  have E4 : \tr (Q *m S) = \tr (S *m P) by rewrite mxtrace_mulC E2.
  rewrite !raddfB /= E3 E4.
  set a := \tr S; set b := \tr (S *m P); ring.
have G1 := tr_gram_ge0 (X *m Y).
have G2 := tr_gram_ge0 (X *m Y *m (invmx A)^T).
have XY0 : X *m Y = 0.
  apply: tr_gram_eq0.
  have /eqP : \tr ((X *m Y)^T *m (X *m Y)) + \tr ((X *m Y *m (invmx A)^T)^T *m (X *m Y *m (invmx A)^T)) = 0.
    by rewrite F1 F2; ring.
  by rewrite paddr_eq0 // => /andP [/eqP].
have : Y^T *m X^T == 0 by rewrite -trmx_mul XY0 trmx0.
by rewrite mulmx_free_eq0 // YT /Y subr_eq0 => /eqP.
Qed.


(* with T4 (through T13's row-block lemmas): A is orthogonal, so D of every query row block (moved by
   Aᵀ) and of every key row block (moved by A⁻¹) is unchanged for every (w, g, H) *)
Corollary gauge_fixed_D_invariant d h (X Z : 'M[R]_(d, h)) (A : 'M[R]_h) :
  row_free X^T -> A \in unitmx ->
  X^T *m X = Z^T *m Z ->
  (X *m A)^T *m (X *m A) = (Z *m (invmx A)^T)^T *m (Z *m (invmx A)^T) ->
  invariant_under (@coupledD _ _) A^T /\ invariant_under (@coupledD _ _) (invmx A).
Proof.
move=> fX uA hb h2.
have cA : conformal A by exists 1; split; [exact: ltr01 | rewrite expr1n; exact: balanced_unique hb h2].
by split; [apply/(T13_query_row_D_iff uA) | apply/(T13_key_row_D_iff uA)].
Qed.

End Gauge.

Section Instance.
Variable R : rcfType.

(* W_Q = W_K = diag(1, 2) *)
Definition gX : 'M[R]_2 := \matrix_(i < 2, j < 2) (if i == j then (if (i : nat) == 0%N then 1 else 2%:R) else 0).
Definition gX_inv : 'M[R]_2 :=
  \matrix_(i < 2, j < 2) (if i == j then (if (i : nat) == 0%N then 1 else 2%:R^-1) else 0).
(* the swap [0 1; 1 0] *)
Definition gswap : 'M[R]_2 := \matrix_(i < 2, j < 2) (if i == j then 0 else 1).

Lemma gX_unit : gX \in unitmx.
Proof.
have h : gX *m gX_inv = 1%:M.
  apply/matrixP => i j; rewrite !mxE !big_ord_recl big_ord0 !mxE /=.
  have t0 : (2%:R : R) != 0 by rewrite pnatr_eq0.
  by case: i => [[|[|i]] hi] //; case: j => [[|[|j]] hj] //=; field.
by case: (mulmx1_unit h).
Qed.

Lemma gswap_sq : gswap *m gswap = 1%:M.
Proof.
apply/matrixP => i j; rewrite !mxE !big_ord_recl big_ord0 !mxE /=.
by case: i => [[|[|i]] hi] //; case: j => [[|[|j]] hj] //=; rewrite !(mul0r, mulr0, mulr1, add0r, addr0).
Qed.

Lemma gswap_unit : gswap \in unitmx.
Proof. by case: (mulmx1_unit gswap_sq). Qed.

Lemma gswap_inv : invmx gswap = gswap.
Proof. by rewrite -[RHS](mulKmx gswap_unit) gswap_sq mulmx1. Qed.

Lemma gswap_tr : gswap^T = gswap.
Proof. by apply/matrixP => i j; rewrite !mxE eq_sym. Qed.

(* the negative control: A = 2·1 takes the balanced (X, X) to an unbalanced pair *)
Lemma gX_scale2_unbalanced :
  (gX *m (2%:R%:M : 'M[R]_2))^T *m (gX *m 2%:R%:M) <>
  (gX *m (invmx (2%:R%:M : 'M[R]_2))^T)^T *m (gX *m (invmx 2%:R%:M)^T).
Proof.
rewrite invmx_scalar tr_scalar_mx !mul_mx_scalar !linearZ /= -?scalemxAl !scalerA.

move/(congr1 (fun M : 'M[R]_2 => M 0 0)); rewrite !mxE !big_ord_recl big_ord0 !mxE /=.
have t0 : (2%:R : R) != 0 by rewrite pnatr_eq0.
move/eqP; rewrite -subr_eq0; apply/negP.
have -> : (2%:R * 2%:R * (1 * 1 + (0 * 0 + 0)) - 2%:R^-1 * 2%:R^-1 * (1 * 1 + (0 * 0 + 0)) : R)
  = 15%:R / 4%:R by field.
by rewrite mulf_eq0 invr_eq0 !pnatr_eq0.
Qed.

Theorem T14_instance :
  [/\ row_free (gX : 'M[R]_2)^T /\ gswap \in unitmx, gX^T *m gX = gX^T *m gX,
      (gX *m gswap)^T *m (gX *m gswap) = (gX *m (invmx gswap)^T)^T *m (gX *m (invmx gswap)^T),
      gswap^T *m gswap = 1%:M
    & (gX *m (2%:R%:M : 'M[R]_2))^T *m (gX *m 2%:R%:M) <>
      (gX *m (invmx (2%:R%:M : 'M[R]_2))^T)^T *m (gX *m (invmx 2%:R%:M)^T)].
Proof.
have fX : row_free (gX : 'M[R]_2)^T by rewrite row_free_unit unitmx_tr gX_unit.
have hb : (gX *m gswap)^T *m (gX *m gswap) = (gX *m (invmx gswap)^T)^T *m (gX *m (invmx gswap)^T).
  by rewrite gswap_inv gswap_tr.
split=> //; [exact: conj fX gswap_unit | exact: balanced_unique fX gswap_unit (erefl _) hb | exact: gX_scale2_unbalanced].
Qed.

End Instance.
