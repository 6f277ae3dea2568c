(* T7, the relative-cutoff pseudo-inverse does not depend on the eigendecomposition chosen.
   MathComp 1.15 has no real spectral theorem, so T07_relative_cutoff.v takes H = U diag(d) Uᵀ
   (UᵀU = I) as a datum; an eigensolver may return another one, H = V diag(d') Vᵀ (VᵀV = I), e.g.
   another orthonormal basis of a repeated eigenvalue's eigenspace, or the eigenvalues in another
   order.  This file proves that the answer is the same:
   - `spectral_fun_indep`: for ANY f : R -> R, U diag(f(d)) Uᵀ = V diag(f(d')) Vᵀ.  Proof: with
     W = UᵀV (orthogonal), diag(d) W = W diag(d'), so W_ij <> 0 only where d_i = d'_j; hence
     diag(f(d)) W = W diag(f(d')), and U diag(f(d)) Uᵀ = U diag(f(d)) W Vᵀ = U W diag(f(d')) Vᵀ
     = V diag(f(d')) Vᵀ.
   - `maxabs_indep`: max|d_i| = max|d'_j| (every d'_j is some d_i: column j of W is a unit vector,
     so some W_ij <> 0, and symmetrically), so the threshold τ = rtol·max|λ| is the same too.
   - `T7_cut_independent`: H⁺_τ = Σ_{|λ_i|>τ} λ_i⁻¹ u_i u_iᵀ is the same matrix for both, for every rtol.
   - `T7_cut_independent_instance`: H = diag(2, 2, 1/2) with U = I and V = the rotation by
     [3/5 −4/5; 4/5 3/5] in the 2-eigenspace (another orthonormal basis of it, V <> U), both
     decompositions of H; with rtol = 1/2 (τ = 1) the cutoff drops 1/2, and H⁺_τ from V is
     diag(1/2, 1/2, 0) = ½(I − e₂e₂ᵀ) (computed from U = I, carried to V by the theorem). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From CoupledCurvature Require Import Defs T07_relative_cutoff.

Section Independence.
Variable R : rcfType.
Variable n : nat.
Implicit Types (U V : 'M[R]_n) (d : 'rV[R]_n).

(* f applied to every eigenvalue *)
Definition map_row (f : R -> R) d : 'rV[R]_n := \row_i f (d 0 i).

(* the intertwining relation diag(d) W = W diag(d'), W = UᵀV *)
Lemma decomp_intertwine U V d d' : U^T *m U = 1%:M -> V^T *m V = 1%:M ->
  U *m diag_mx d *m U^T = V *m diag_mx d' *m V^T ->
  diag_mx d *m (U^T *m V) = (U^T *m V) *m diag_mx d'.
Proof.
move=> hU hV hH.
have VVt : V *m V^T = 1%:M by apply: mulmx1C.
have := congr1 (fun M => U^T *m M *m V) hH => /=.
rewrite !mulmxA hU mul1mx -(mulmxA _ V^T V) hV mulmx1 => <-.
by [].
Qed.

(* entrywise: W_ij <> 0 only where d_i = d'_j *)
Lemma intertwine_entry (W : 'M[R]_n) d d' i j :
  diag_mx d *m W = W *m diag_mx d' -> W i j != 0 -> d 0 i = d' 0 j.
Proof.
move=> hW Wij; have := congr1 (fun M : 'M[R]_n => M i j) hW => /=.
rewrite mul_diag_mx mul_mx_diag !mxE => /eqP.
by rewrite mulrC -subr_eq0 -mulrBr mulf_eq0 (negbTE Wij) /= subr_eq0 => /eqP.
Qed.

Lemma intertwine_fun (f : R -> R) (W : 'M[R]_n) d d' :
  diag_mx d *m W = W *m diag_mx d' -> diag_mx (map_row f d) *m W = W *m diag_mx (map_row f d').
Proof.
move=> hW; apply/matrixP => i j; rewrite mul_diag_mx mul_mx_diag !mxE.
have [->|Wij] := eqVneq (W i j) 0; first by rewrite mulr0 mul0r.
by rewrite (intertwine_entry hW Wij) mulrC.
Qed.

Theorem spectral_fun_indep (f : R -> R) U V d d' : U^T *m U = 1%:M -> V^T *m V = 1%:M ->
  U *m diag_mx d *m U^T = V *m diag_mx d' *m V^T ->
  U *m diag_mx (map_row f d) *m U^T = V *m diag_mx (map_row f d') *m V^T.
Proof.
move=> hU hV hH; set W := U^T *m V.
have hW := decomp_intertwine hU hV hH.
have UUt : U *m U^T = 1%:M by apply: mulmx1C.
have VVt : V *m V^T = 1%:M by apply: mulmx1C.
have hF := intertwine_fun f hW.
have -> : U *m diag_mx (map_row f d) *m U^T = U *m (diag_mx (map_row f d) *m W) *m V^T.
  by rewrite /W !mulmxA -(mulmxA _ V V^T) VVt mulmx1.
by rewrite hF /W !mulmxA UUt mul1mx.
Qed.

Lemma le_maxabs d i : `|d 0 i| <= maxabs d.
Proof.
rewrite /maxabs; elim: (index_enum _) (mem_index_enum i) => // a r IH.
rewrite inE big_cons Order.TotalTheory.le_maxr.
by case/orP => [/eqP->|/IH->]; rewrite ?Order.POrderTheory.lexx ?orbT.
Qed.

Lemma maxabs_le d m : 0 <= m -> (forall i, `|d 0 i| <= m) -> maxabs d <= m.
Proof.
move=> m0 h; rewrite /maxabs; elim/big_ind: _ => // x y hx hy.
by rewrite Order.TotalTheory.le_maxl hx hy.
Qed.

Lemma maxabs_ge0 d : 0 <= maxabs d.
Proof.
rewrite /maxabs; elim/big_ind: _ => // x y hx hy.
by rewrite Order.TotalTheory.le_maxr hx.
Qed.

(* a column of an orthogonal matrix has a nonzero entry *)
Lemma orth_col_neq0 (W : 'M[R]_n) j : W^T *m W = 1%:M -> exists i, W i j != 0.
Proof.
move=> WtW; apply/existsP; apply: contraT; rewrite negb_exists => /forallP h0.
have := congr1 (fun M : 'M[R]_n => M j j) WtW => /=; rewrite !mxE eqxx /=.
rewrite big1 => [/eqP|i _]; first by rewrite eq_sym oner_eq0.
by rewrite !mxE (eqP (negPn (h0 i))) mulr0.
Qed.

(* every eigenvalue d'_j of the second decomposition is one of the first's *)
Lemma decomp_eigen U V d d' j : U^T *m U = 1%:M -> V^T *m V = 1%:M ->
  U *m diag_mx d *m U^T = V *m diag_mx d' *m V^T -> exists i, d' 0 j = d 0 i.
Proof.
move=> hU hV hH; set W := U^T *m V.
have hW := decomp_intertwine hU hV hH.
have WtW : W^T *m W = 1%:M.
  by rewrite /W trmx_mul trmxK mulmxA -(mulmxA V^T) (mulmx1C hU) mulmx1 hV.
have [i Wij] := orth_col_neq0 j WtW.
by exists i; rewrite (intertwine_entry hW Wij).
Qed.

Theorem maxabs_indep U V d d' : U^T *m U = 1%:M -> V^T *m V = 1%:M ->
  U *m diag_mx d *m U^T = V *m diag_mx d' *m V^T -> maxabs d = maxabs d'.
Proof.
move=> hU hV hH; apply/eqP; rewrite Order.POrderTheory.eq_le.
apply/andP; split; apply: maxabs_le; rewrite ?maxabs_ge0 // => i.
  have [j ->] := decomp_eigen i hV hU (esym hH); exact: le_maxabs.
have [j ->] := decomp_eigen i hU hV hH; exact: le_maxabs.
Qed.

Theorem T7_cut_independent rtol U V d d' : U^T *m U = 1%:M -> V^T *m V = 1%:M ->
  U *m diag_mx d *m U^T = V *m diag_mx d' *m V^T ->
  pinv_cut rtol U d = pinv_cut rtol V d'.
Proof.
move=> hU hV hH; rewrite /pinv_cut; set f := fun x : R => if rtol * maxabs d < `|x| then x^-1 else 0.
have -> : cut_inv rtol d = map_row f d by apply/rowP => i; rewrite !mxE.
have -> : cut_inv rtol d' = map_row f d'.
  by apply/rowP => i; rewrite !mxE /f (maxabs_indep hU hV hH).
exact: spectral_fun_indep.
Qed.

End Independence.

Section Instance.
Variable R : rcfType.

(* H = diag(2, 2, 1/2) *)
Definition ind_d : 'rV[R]_3 := \row_(i < 3) (if (i : nat) == 2%N then 2%:R^-1 else 2%:R).
(* another orthonormal basis of the 2-eigenspace: the rotation [3/5 −4/5; 4/5 3/5] there *)
Definition ind_V : 'M[R]_3 := \matrix_(i < 3, j < 3)
  (if (i : nat) == 2%N then (if (j : nat) == 2%N then 1 else 0)
   else if (j : nat) == 2%N then 0
   else if i == j then 3%:R / 5%:R
   else if (i : nat) == 0%N then - (4%:R / 5%:R) else 4%:R / 5%:R).
Definition ind_rtol : R := 2%:R^-1.

Lemma ord3_cases (i : 'I_3) : i = 0 \/ i = 1 \/ i = 2%:R.
Proof.
case: i => [[|[|[|k]]] ?]; [left|right; left|right; right|by []];
  by apply/val_inj => /=; rewrite ?modn_small.
Qed.

Lemma ind_V_orth : ind_V^T *m ind_V = 1%:M.
Proof.
apply/matrixP => i j; rewrite !mxE !big_ord_recr big_ord0 /= !mxE add0r.
by have [->|[->|->]] := ord3_cases i; have [->|[->|->]] := ord3_cases j;
  rewrite /= ?mulr0 ?mul0r ?addr0 ?add0r ?mulr1; field; rewrite ?pnatr_eq0.
Qed.

Lemma ind_V_decomp : (1%:M : 'M[R]_3) *m diag_mx ind_d *m (1%:M)^T = ind_V *m diag_mx ind_d *m ind_V^T.
Proof.
rewrite trmx1 mul1mx mulmx1 mul_mx_diag; apply/matrixP => i j.
rewrite !mxE !big_ord_recr !big_ord0 /= !mxE add0r.
by have [->|[->|->]] := ord3_cases i; have [->|[->|->]] := ord3_cases j;
  rewrite /= ?mulr0 ?mul0r ?addr0 ?add0r ?mulr1 ?mul1r ?mulr0n ?mulr1n; field; rewrite ?pnatr_eq0.
Qed.

Lemma ind_V_neq1 : ind_V != 1%:M.
Proof.
apply/negP => /eqP/matrixP/(_ 1 0); rewrite !mxE /=.
by move/eqP; rewrite mulf_eq0 invr_eq0 !pnatr_eq0.
Qed.

Lemma ind_maxabs : maxabs ind_d = 2%:R.
Proof.
rewrite /maxabs !big_ord_recl big_ord0 !mxE /= !ger0_norm ?invr_ge0 ?ler0n //.
have h0 : (0 : R) <= 2%:R^-1 by rewrite invr_ge0 ler0n.
have h1 : (2%:R : R)^-1 <= 2%:R.
  by rewrite (@Order.POrderTheory.le_trans _ _ 1) // ?ler1n // Order.POrderTheory.ltW // invf_lt1 ?ltr0n ?ltr1n.
by rewrite (Order.POrderTheory.max_l h0) (Order.POrderTheory.max_l h1) (Order.POrderTheory.max_l (Order.POrderTheory.lexx _)).
Qed.

Lemma ind_cut : cut_inv ind_rtol ind_d = \row_(i < 3) (if (i : nat) == 2%N then 0 else 2%:R^-1).
Proof.
apply/rowP => i; rewrite !mxE ind_maxabs /ind_rtol mulVf ?pnatr_eq0 //.
case: i => [[|[|[|i]]] hi] //=; rewrite ger0_norm ?invr_ge0 ?ler0n ?ltr1n //.
by rewrite invf_gt1 ?ltr0n // ltrn1.
Qed.

Theorem T7_cut_independent_instance :
  [/\ (1%:M : 'M[R]_3)^T *m 1%:M = 1%:M, ind_V^T *m ind_V = 1%:M,
      1%:M *m diag_mx ind_d *m (1%:M)^T = ind_V *m diag_mx ind_d *m ind_V^T,
      ind_V != 1%:M
    & pinv_cut ind_rtol ind_V ind_d = 2%:R^-1 *: (1%:M - e 2 *m (e 2)^T)].
Proof.
split; [by rewrite trmx1 mulmx1 | exact: ind_V_orth | exact: ind_V_decomp | exact: ind_V_neq1 |].
rewrite -(T7_cut_independent _ _ ind_V_orth ind_V_decomp) ?trmx1 ?mulmx1 //.
rewrite /pinv_cut ind_cut trmx1 mul1mx mulmx1; apply/matrixP => i j.
rewrite !mxE big_ord_recr big_ord0 /= !mxE add0r.
by case: i => [[|[|[|i]]] hi] //; case: j => [[|[|[|j]]] hj] //=;
  rewrite ?(mulr0, mul0r, mulr1, mul1r, subr0, subrr, mulr0n, mulr1n).
Qed.

End Instance.
